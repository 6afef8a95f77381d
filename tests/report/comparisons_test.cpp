// report/comparisons.cpp: which groups are compared and how (paired, Welch, Holm, planned
// contrasts, identical runs).
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/report/analysis.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::csv_cell;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_run;

TEST(Report, WelchOverDifferentSeedsMarksRealDifference) {
  TempDir tmp;
  const std::vector<double> a = {0.86, 0.87, 0.85}, b = {0.84, 0.83, 0.845};
  for (int seed = 1; seed <= 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.test_acc = {0.5, a[seed - 1]};
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "linear";
    r.seed = seed + 10;  // no seed in common: Welch
    r.test_acc = {0.5, b[seed - 1]};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 1u);
  const GroupComparison& c = d.comparisons[0];
  EXPECT_EQ(c.key, "schedule.scale_rule");
  // B = linear sorts first: A is linear, B is none.
  EXPECT_EQ(d.groups[c.a].label, "schedule.scale_rule=linear");
  EXPECT_EQ(c.stats.method, CompareMethod::welch);
  EXPECT_NEAR(c.stats.p, 0.04423613448708553, 1e-6);
  EXPECT_EQ(c.stats.m, 1u);
  EXPECT_EQ(c.stats.verdict, Verdict::b_better);
  EXPECT_NEAR(c.stats.diff, 86 - 83.8333333333, 1e-6);
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("| difference (B - A) | 95% CI | n | method | adjusted p | verdict |"), std::string::npos) << md;
  EXPECT_NE(md.find("| +2.17 pts |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 / 3 | Welch |"), std::string::npos) << md;
  EXPECT_NE(md.find("schedule.scale_rule=none better than schedule.scale_rule=linear by 2.17 points"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("corrected for 1 comparison (Holm)"), std::string::npos) << md;
  const std::string csv = render_comparisons_csv(d);
  EXPECT_NE(csv.find("schedule.scale_rule,linear,none,schedule.scale_rule=linear,schedule.scale_rule=none,"
                     "final_test_acc,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",3,3,Welch,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",B better,"), std::string::npos) << csv;
}

TEST(Report, IdenticalMetricsAreEquivalentNotSignificant) {
  // The same accuracy in every run: paired over the same seeds, and Welch over different seeds
  // (zero spread), the verdict is "equivalent", never better or worse.
  for (int offset : {0, 10}) {
    TempDir tmp;
    for (int seed = 1; seed <= 3; ++seed) {
      FakeRun r;
      r.seed = seed;
      r.test_acc = {0.5, 0.85};
      write_run(tmp.path() / "runs", r);
      r.scale_rule = "linear";
      r.seed = seed + offset;
      r.test_acc = {0.6, 0.85};  // the same final metric from other runs (identical runs: no verdict)
      write_run(tmp.path() / "runs", r);
    }
    const ReportData d = analyze(options_for(tmp));
    ASSERT_EQ(d.comparisons.size(), 1u);
    const Comparison& c = d.comparisons[0].stats;
    EXPECT_EQ(c.method, offset == 0 ? CompareMethod::paired : CompareMethod::welch);
    EXPECT_EQ(c.verdict, Verdict::equivalent) << d.comparisons[0].sentence;
    EXPECT_NE(d.comparisons[0].sentence.find("equivalent to"), std::string::npos) << d.comparisons[0].sentence;
    EXPECT_EQ(render_markdown(d).find("better than"), std::string::npos);
  }
}

TEST(Report, PairingBySeedFindsAConstantOffsetUnderBigSeedSpread) {
  // Seeds 2 points apart (8 over 5 seeds); B is 0.3-0.4 points above A on every seed.
  auto report_for = [](int b_seed_offset) {
    TempDir tmp;
    for (int seed = 1; seed <= 5; ++seed) {
      FakeRun r;
      r.seed = seed;
      const double a = 0.78 + 0.02 * seed;
      r.test_acc = {0.5, a};
      write_run(tmp.path() / "runs", r);
      r.scale_rule = "linear";
      r.seed = seed + b_seed_offset;
      r.test_acc = {0.5, a + 0.003 + 0.001 * (seed % 2)};
      write_run(tmp.path() / "runs", r);
    }
    return analyze(options_for(tmp));
  };
  const ReportData paired = report_for(0);
  ASSERT_EQ(paired.comparisons.size(), 1u);
  const Comparison& p = paired.comparisons[0].stats;  // A = linear (sorted first), B = none: B - A < 0
  EXPECT_EQ(p.method, CompareMethod::paired);
  EXPECT_EQ(p.n_pairs, 5u);
  EXPECT_EQ(p.verdict, Verdict::b_worse) << paired.comparisons[0].sentence;
  EXPECT_NEAR(p.diff, -0.36, 1e-9);  // -0.4, -0.3, -0.4, -0.3, -0.4
  const ReportData unpaired = report_for(100);
  const Comparison& w = unpaired.comparisons[0].stats;
  EXPECT_EQ(w.method, CompareMethod::welch);
  EXPECT_EQ(w.verdict, Verdict::cant_tell) << "the seed spread hides it without pairing";
}

TEST(Report, APlannedContrastComparesGroupsThatDifferInTwoSettings) {
  // 1 replica unscaled vs 2 replicas with the linear rule: two settings, so only a contrast the
  // spec plans compares them; it joins the Holm family of the two one-setting comparisons.
  TempDir tmp;
  const json contrasts = {{{"name", "two GPUs, scaled"},
                           {"a", {{"replicas.count", 1}}},
                           {"b", {{"replicas.count", 2}, {"schedule.scale_rule", "linear"}}}},
                          {{"a", {{"replicas.count", 2}}}, {"b", {{"replicas.count", 1}}}}};
  for (int seed = 1; seed <= 4; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.spec_patch = {{"report", {{"contrasts", contrasts}}}};
    r.test_acc = {0.5, 0.80 + 0.01 * seed};
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.test_acc = {0.5, 0.79 + 0.01 * seed};
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "linear";
    r.test_acc = {0.5, 0.82 + 0.01 * seed + (seed % 2 ? 0.001 : 0.0)};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 3u);
  const GroupComparison& c = d.comparisons.back();
  EXPECT_EQ(c.planned, "two GPUs, scaled");
  EXPECT_EQ(c.key, "replicas.count, schedule.scale_rule");
  EXPECT_EQ(c.value_a, "1, none");
  EXPECT_EQ(c.value_b, "2, linear");
  EXPECT_EQ(c.stats.method, CompareMethod::paired);
  EXPECT_NEAR(c.stats.diff, 2.05, 1e-9);  // +2.1, +2.0, +2.1, +2.0 points
  EXPECT_EQ(c.stats.verdict, Verdict::b_better) << c.sentence;
  EXPECT_EQ(c.stats.m, 3u) << "Holm over the two one-setting comparisons and the contrast";
  bool warned = false;
  for (const auto& w : d.warnings)
    warned = warned || w.find("report.contrasts[1].a: {\"replicas.count\":2} selects 2 groups") != std::string::npos;
  EXPECT_TRUE(warned) << "the ambiguous second contrast is named, not guessed";
  EXPECT_NE(
      render_markdown(d).find("two GPUs, scaled (planned): replicas.count, schedule.scale_rule: 1, none vs 2, linear"),
      std::string::npos);
}

TEST(Report, HolmDemotesABorderlineDifferenceAmongManyComparisons) {
  // Five values of batch.per_replica: 10 comparisons. Group 16 vs 256 is borderline (p ~ 0.04
  // alone); the others are clear-cut or identical.
  TempDir tmp;
  const std::vector<double> base = {80, 84, 82, 86, 83};  // points, by seed
  const std::vector<double> bump = {0.2, 1.2, 0.1, 1.0, 0.7};
  const std::map<int, double> shift = {{16, 0}, {32, 5}, {64, 5}, {128, 5}};
  for (int batch : {16, 32, 64, 128, 256}) {
    for (int seed = 1; seed <= 5; ++seed) {
      FakeRun r;
      r.seed = seed;
      r.per_replica = batch;
      r.run_id = fmt::format("b{}-s{}", batch, seed);
      const double pts = base[seed - 1] + (batch == 256 ? bump[seed - 1] : shift.at(batch));
      r.test_acc = {0.5, pts / 100};
      write_run(tmp.path() / "runs", r);
    }
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 10u);
  const GroupComparison* borderline = nullptr;
  for (const auto& c : d.comparisons) {
    EXPECT_EQ(c.stats.m, 10u);
    if (d.groups[c.a].label == "batch.per_replica=16" && d.groups[c.b].label == "batch.per_replica=256")
      borderline = &c;
  }
  ASSERT_NE(borderline, nullptr);
  EXPECT_LT(borderline->stats.p, 0.05);
  EXPECT_GE(borderline->stats.p_adjusted, 0.05);
  EXPECT_EQ(borderline->stats.verdict, Verdict::cant_tell);
  EXPECT_NE(borderline->sentence.find("not significant once corrected for 10 comparisons"), std::string::npos)
      << borderline->sentence;
  // Alone it would have been called: the same values in a one-comparison family.
  EXPECT_EQ(compare_by_seed(d.groups[borderline->a].metric_by_seed, d.groups[borderline->b].metric_by_seed).verdict,
            Verdict::b_better);
  EXPECT_NE(render_html(d).find("corrected for 10 comparisons (Holm)"), std::string::npos);
}

TEST(Report, FinalEpochsAveragesTheLastEpochsAndSettingsComeFromTheSpec) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.test_acc = {0.5, 0.8, 0.9};
    r.spec_patch = {{"report", {{"final_epochs", 2}, {"equivalence_pts", 2.0}}}};
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "linear";
    r.test_acc = {0.5, 0.81, 0.9};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  EXPECT_EQ(d.final_epochs, 2);
  EXPECT_EQ(d.equivalence_pts, 2.0);
  const GroupStats& none = group_labelled(d, "schedule.scale_rule=none");
  EXPECT_NEAR(none.metric.mean, 85, 1e-9) << "mean of the last two epochs, in points";
  EXPECT_NEAR(none.final_test_acc.mean, 0.9, 1e-12) << "the final accuracy itself is unchanged";
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_NEAR(d.comparisons[0].stats.diff, -0.5, 1e-9);  // linear (A) 85.5, none (B) 85
  EXPECT_EQ(d.comparisons[0].stats.options.delta, 2.0);
  EXPECT_NE(render_markdown(d).find("A acc (last 2 epochs)"), std::string::npos);
  ReportOptions o = options_for(tmp);
  o.final_epochs = 1;
  EXPECT_NEAR(group_labelled(analyze(o), "schedule.scale_rule=none").metric.mean, 90, 1e-9) << "options win";
}

TEST(Report, TestSetSamplingErrorFromTheSpecsDataset) {
  TempDir tmp;
  FakeRun r;
  r.test_acc = {0.8};
  r.spec_patch = {{"dataset", {{"name", "fashion-mnist"}, {"test_limit", 0}}}};
  write_run(tmp.path() / "runs", r);
  r.scale_rule = "linear";
  r.spec_patch = {{"dataset", {{"name", "fashion-mnist"}, {"test_limit", 2500}}}};
  write_run(tmp.path() / "runs", r);
  r.scale_rule = "sqrt";
  r.spec_patch = {{"dataset", {{"name", "idx"}, {"test_limit", 0}}}};
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 3u);
  const GroupStats& full =
      group_labelled(d, "dataset.name=fashion-mnist, dataset.test_limit=0, schedule.scale_rule=none");
  EXPECT_EQ(full.test_samples, 10000);
  EXPECT_NEAR(full.test_sampling_error_pts, 0.4, 1e-9);  // 100 sqrt(0.8 * 0.2 / 10000)
  const GroupStats& part =
      group_labelled(d, "dataset.name=fashion-mnist, dataset.test_limit=2500, schedule.scale_rule=linear");
  EXPECT_NEAR(part.test_sampling_error_pts, 0.8, 1e-9);
  const GroupStats& idx = group_labelled(d, "dataset.name=idx, dataset.test_limit=0, schedule.scale_rule=sqrt");
  EXPECT_FALSE(idx.test_samples.has_value());
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("\xC2\xB1"
                    "0.40 pts (n_test 10000)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("best test acc*"), std::string::npos);
  EXPECT_NE(md.find("best over epochs: optimistic, chosen on the test set"), std::string::npos);
}

TEST(Report, SingleSeedCannotTell) {
  TempDir tmp;
  FakeRun r;
  r.test_acc = {0.86};
  write_run(tmp.path() / "runs", r);
  r.replicas = 2;
  r.test_acc = {0.84};
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].stats.method, CompareMethod::too_few);
  EXPECT_EQ(d.comparisons[0].stats.verdict, Verdict::cant_tell);
  EXPECT_NE(render_markdown(d).find("| too few runs |"), std::string::npos);
  EXPECT_NE(render_markdown(d).find("give no seed-to-seed spread"), std::string::npos) << render_markdown(d);
}

// A scale rule at the base batch (factor 1) changes nothing: its runs are those of "none", record
// for record. Such a pair is labelled, gets no verdict and is not counted in Holm's m, which then
// holds only the comparison that tests something. One epoch that differs in one seed is no longer
// identical.
TEST(Report, IdenticalRunsGetNoVerdictAndStayOutOfHolmsFamily) {
  auto write_sweep = [](const fs::path& root, double seed3_epoch1) {
    for (int seed = 1; seed <= 3; ++seed) {
      FakeRun r;
      r.seed = seed;
      r.test_acc = {0.5 + 0.01 * seed, 0.7, 0.8 + 0.01 * seed};
      write_run(root, r);
      r.scale_rule = "linear";  // per_replica 64 = base_batch 64: factor 1
      if (seed == 3) r.test_acc[0] = seed3_epoch1;
      write_run(root, r);
      r.scale_rule = "none";
      r.replicas = 2;
      r.test_acc.back() -= 0.02 + 0.001 * seed;
      write_run(root, r);
    }
  };
  TempDir tmp;
  write_sweep(tmp.path() / "runs", 0.53);
  ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  const GroupComparison* same = nullptr;
  const GroupComparison* other = nullptr;
  for (const auto& c : d.comparisons) (c.key == "schedule.scale_rule" ? same : other) = &c;
  ASSERT_TRUE(same && other);
  EXPECT_TRUE(same->identical);
  EXPECT_EQ(same->identical_seeds, 3u);
  EXPECT_EQ(same->stats.m, 0u);
  EXPECT_FALSE(other->identical);
  EXPECT_EQ(other->stats.m, 1u) << "only the replica comparison counts";
  EXPECT_NE(same->sentence.find("identical runs"), std::string::npos) << same->sentence;
  EXPECT_NE(same->sentence.find("changing schedule.scale_rule from linear to none did nothing here"), std::string::npos)
      << same->sentence;
  write_report(o);
  EXPECT_NE(read_file(o.out_dir / "comparisons.csv").find(",0,identical runs,"), std::string::npos)
      << read_file(o.out_dir / "comparisons.csv");
  EXPECT_NE(read_file(o.out_dir / "report.md").find("| identical runs |"), std::string::npos);

  TempDir differs;
  write_sweep(differs.path() / "runs", 0.54);  // seed 3's first epoch moved
  for (const auto& c : analyze(options_for(differs)).comparisons) {
    EXPECT_FALSE(c.identical) << c.key;
    EXPECT_EQ(c.stats.m, 2u);
  }
}

// An identical pair tested nothing, and every column says so: no p, no interval (95% or 90%),
// method "identical", m 0, in comparisons.csv and in report.md's comparisons table (before: p 1,
// interval 0 to 0, "paired by seed").
TEST(Report, IdenticalRunsShowNoTestInAnyColumn) {
  TempDir tmp;
  for (int seed = 1; seed <= 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.test_acc = {0.5, 0.7, 0.8 + 0.01 * seed};
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "linear";  // factor 1 at the base batch: the same records
    write_run(tmp.path() / "runs", r);
  }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string csv = read_file(o.out_dir / "comparisons.csv");
  ASSERT_EQ(csv_cell(csv, 0, "verdict"), "identical runs") << csv;
  EXPECT_EQ(csv_cell(csv, 0, "method"), "identical");
  EXPECT_EQ(csv_cell(csv, 0, "m"), "0");
  for (const char* empty : {"p", "p_adjusted", "ci95_low", "ci95_high", "ci90_low", "ci90_high", "equivalence_seeds"})
    EXPECT_EQ(csv_cell(csv, 0, empty), "") << empty;
  EXPECT_EQ(csv_cell(csv, 0, "diff_pts"), "0");
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("| \xE2\x80\x94 | 3 pairs | identical | \xE2\x80\x94 |"), std::string::npos) << md;
}

// Equivalent with the 90% interval 0.03 points inside the +-0.5 margin (95% interval across 0): borderline, and the
// sentence says how many seeds a claim at this spread needs; 0.25 points inside: not borderline.
TEST(ReportCompare, AnEquivalenceWhoseIntervalEndsAtTheMarginIsBorderline) {
  const SeedValues a = {{1, 80}, {2, 81}, {3, 82}, {4, 83}, {5, 84}};
  auto shifted = [&](const std::vector<double>& d) {
    SeedValues b;
    for (const auto& [seed, v] : a) b[seed] = v + d[static_cast<size_t>(seed - 1)];
    return b;
  };
  const Comparison close = compare_by_seed(a, shifted({0.57, -0.23, 0.37, -0.03, 0.17}));
  ASSERT_EQ(close.verdict, Verdict::equivalent);
  EXPECT_NEAR(close.ci90_high, 0.4715, 1e-3);
  EXPECT_TRUE(close.borderline);
  ASSERT_TRUE(close.equivalence_seeds);
  EXPECT_GT(*close.equivalence_seeds, 2);
  const std::string sentence = describe(close);
  EXPECT_NE(sentence.find("borderline: the interval ends 0.03 points inside the margin"), std::string::npos)
      << sentence;
  EXPECT_NE(sentence.find(fmt::format("about {} seeds make the claim hold 80% of the time", *close.equivalence_seeds)),
            std::string::npos)
      << sentence;

  const Comparison clear = compare_by_seed(a, shifted({0.1, 0.3, -0.1, 0.2, 0.0}));
  ASSERT_EQ(clear.verdict, Verdict::equivalent);
  EXPECT_FALSE(clear.borderline);
  EXPECT_EQ(describe(clear).find("borderline"), std::string::npos);
}
