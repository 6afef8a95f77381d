#include "ddplab/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string_view>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/report/stats.h"
#include "ddplab/report/svg.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::run_command;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;
using ddplab::testing::write_run;

namespace {

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The cell of a CSV (quoted fields allowed) in data row `row` (0: the first after the header)
// under the column named `name`; throws when there is none.
std::string csv_cell(const std::string& csv, size_t row, const std::string& name) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (quoted && c == '"' && i + 1 < csv.size() && csv[i + 1] == '"')
      rows.back().back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (!quoted && c == ',')
      rows.back().emplace_back();
    else if (!quoted && c == '\n')
      rows.emplace_back(1);
    else
      rows.back().back() += c;
  }
  const auto& header = rows.front();
  const size_t col = static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  if (col == header.size() || row + 1 >= rows.size() || col >= rows[row + 1].size())
    throw std::runtime_error("no cell " + name);
  return rows[row + 1][col];
}

}  // namespace

TEST(ReportStats, MeanAndSampleStd) {
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_NEAR(sample_std({1, 2, 3, 4}), std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_EQ(sample_std({7}), 0);
  EXPECT_TRUE(std::isnan(mean({})));
}

TEST(ReportStats, StudentTCdfMatchesScipy) {
  // scipy.stats.t.cdf
  EXPECT_NEAR(student_t_cdf(-2.0, 3.3), 0.0654794322197247, 1e-9);
  EXPECT_NEAR(student_t_cdf(1.5, 50), 0.9300485875707865, 1e-9);
  EXPECT_NEAR(student_t_cdf(0, 4), 0.5, 1e-12);
  // df = 1 is Cauchy: 0.5 + atan(t) / pi.
  EXPECT_NEAR(student_t_cdf(2.0, 1), 0.5 + std::atan(2.0) / M_PI, 1e-10);
  EXPECT_NEAR(regularized_incomplete_beta(2, 3, 0.4), 0.5248, 1e-10);  // 1 - sum_{j<2} C(4,j) .4^j .6^(4-j)
}

TEST(ReportStats, WelchMatchesScipy) {
  // scipy.stats.ttest_ind(a, b, equal_var=False)
  WelchResult r = welch_t_test({0.86, 0.87, 0.85}, {0.84, 0.83, 0.845});
  ASSERT_TRUE(r.valid);
  EXPECT_NEAR(r.t, 2.9824045403173076, 1e-9);
  // By hand: s_a^2 = 1e-4, s_b^2 = 1.75e-4 / 3; df = (va + vb)^2 / (va^2 / 2 + vb^2 / 2), v = s^2 / 3.
  const double va = 1e-4 / 3, vb = 1.75e-4 / 3 / 3;
  EXPECT_NEAR(r.df, (va + vb) * (va + vb) / (va * va / 2 + vb * vb / 2), 1e-9);
  EXPECT_NEAR(r.df, 3.7409326424870475, 1e-9);  // scipy's df
  EXPECT_NEAR(r.p, 0.04423613448708553, 1e-6);

  r = welch_t_test({1, 2, 3, 4, 5.5}, {2, 4, 6, 8.5});
  EXPECT_NEAR(r.t, -1.2700252065371362, 1e-9);
  EXPECT_NEAR(r.p, 0.2617957138615186, 1e-6);

  EXPECT_FALSE(welch_t_test({0.9}, {0.8, 0.81}).valid);
  EXPECT_EQ(welch_t_test({0.5, 0.5}, {0.5, 0.5}).p, 1);
  EXPECT_EQ(welch_t_test({0.5, 0.5}, {0.6, 0.6}).p, 0);
}

TEST(ReportSvg, NiceTicksCoverRange) {
  const auto t = nice_ticks(0.13, 0.87, 6);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.13);
  EXPECT_GE(t.back(), 0.87);
  EXPECT_NEAR(t[1] - t[0], 0.2, 1e-12);  // 0.74 / 6 rounds up to a step of 2 x 10^-1
  EXPECT_FALSE(nice_ticks(5, 5).empty());
}

TEST(Report, GroupsRunsThatDifferOnlyInSeed) {
  TempDir tmp;
  const std::vector<std::vector<double>> accs = {{0.5, 0.86}, {0.5, 0.87}, {0.5, 0.85}};
  for (int seed = 1; seed <= 3; ++seed) {
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.test_acc = accs[seed - 1];
      if (replicas == 2) r.test_acc.back() -= 0.02;
      write_run(tmp.path() / "runs", r);
    }
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.runs.size(), 6u);
  ASSERT_EQ(d.groups.size(), 2u);
  EXPECT_EQ(d.differing_keys, std::vector<std::string>{"replicas.count"});
  EXPECT_EQ(d.groups[0].label, "replicas.count=1");
  EXPECT_EQ(d.groups[1].label, "replicas.count=2");
  for (const auto& g : d.groups) EXPECT_EQ(g.n, 3);
  EXPECT_NEAR(d.groups[0].final_test_acc.mean, 0.86, 1e-12);
  EXPECT_NEAR(d.groups[0].final_test_acc.std, 0.01, 1e-12);
  EXPECT_NEAR(d.groups[1].final_test_acc.mean, 0.84, 1e-12);
  EXPECT_NEAR(d.groups[0].best_test_acc.mean, 0.86, 1e-12);
  EXPECT_NEAR(d.groups[0].final_train_loss.mean, 0.5, 1e-12);
  EXPECT_NEAR(d.groups[0].final_test_loss.mean, 0.6, 1e-12);
}

// A run written before a spec field existed groups with today's run that leaves it at its default.
TEST(Report, AnOlderSpecWithoutANewFieldGroupsWithItsDefault) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.run_id = "old-" + std::to_string(seed);
    write_run(tmp.path() / "runs", r);
    r.run_id = "new-" + std::to_string(seed);
    r.seed = seed + 2;
    r.spec_patch = {{"model", {{"ema_decay", 0}}}, {"log", {{"every_steps", 0}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.runs.size(), 4u);
  EXPECT_EQ(d.groups.size(), 1u);
}

TEST(Report, LabelsNameEveryDifferingKey) {
  TempDir tmp;
  for (int replicas : {1, 2})
    for (const char* rule : {"none", "linear"}) {
      FakeRun r;
      r.replicas = replicas;
      r.scale_rule = rule;
      write_run(tmp.path() / "runs", r);
    }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 4u);
  EXPECT_NO_THROW(group_labelled(d, "replicas.count=2, schedule.scale_rule=linear"));
  // 4 groups in a 2x2 grid: 4 pairs differ in exactly one key, 2 diagonals are not compared.
  EXPECT_EQ(d.comparisons.size(), 4u);
}

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

TEST(Report, ThreadsSplitByReplicaCountStillComparesReplicaCounts) {
  // replicas.threads "auto" resolves to cores / replicas: 1 x 2 threads vs 2 x 1 thread is one
  // choice (the replica count), and the report must still test it.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.threads = 2;
    r.test_acc = {0.86 + 0.001 * seed};
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.threads = 1;
    r.test_acc = {0.84 + 0.001 * seed};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "replicas.count");
  EXPECT_EQ(d.comparisons[0].value_a + " vs " + d.comparisons[0].value_b, "1 vs 2");
  EXPECT_NE(render_markdown(d).find("replicas.count: 1 vs 2 (replicas.threads: 2 vs 1 follows)"), std::string::npos)
      << render_markdown(d);
  // The follower is named once in the opening, not in every label.
  EXPECT_EQ(d.groups[0].label, "replicas.count=1");
  EXPECT_EQ(d.groups[1].label, "replicas.count=2");
  EXPECT_NE(render_markdown(d).find("`replicas.threads follows replicas.count` (left out of the labels)"),
            std::string::npos);
}

TEST(Report, ThreadsThatDoNotFollowTheReplicaCountStayInTheLabels) {
  TempDir tmp;
  for (int threads : {1, 2}) {
    FakeRun r;
    r.threads = threads;
    r.run_id = fmt::format("t{}", threads);
    write_run(tmp.path() / "runs", r);
  }
  FakeRun r;
  r.replicas = 2;
  r.threads = 1;
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 3u);
  group_labelled(d, "replicas.count=1, replicas.threads=2");
  EXPECT_TRUE(d.follower_notes.empty());
}

TEST(Report, LabelsMapNamesGroups) {
  TempDir tmp;
  for (int replicas : {1, 2}) {
    FakeRun r;
    r.replicas = replicas;
    r.spec_patch = {{"report", {{"labels", {{"replicas.count=2", "2 GPUs"}}}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  group_labelled(d, "replicas.count=1");
  group_labelled(d, "2 GPUs");
  EXPECT_NE(render_charts(d).front().svg.find(">2 GPUs<"), std::string::npos);
}

TEST(Report, TornLineIsSkippedWithFileAndLine) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t second = text.find('\n') + 1;
  text.insert(second, "{\"epoch\": 9, \"test_a\n");  // a torn line 2
  write_file(dir / "epochs.jsonl", text);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find((dir / "epochs.jsonl").string() + ":2:"), std::string::npos) << s.warnings[0];
  EXPECT_EQ(s.data.runs[0].epochs.size(), 3u);
  EXPECT_NE(read_file(tmp.path() / "report" / "report.html").find("epochs.jsonl:2:"), std::string::npos);
}

// A line that is JSON but not a record (rundir::EpochRecord::from_json) is skipped, naming the field.
TEST(Report, RecordWithAWrongTypedFieldIsSkippedNamingTheField) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t second = text.find('\n') + 1;
  const size_t third = text.find('\n', second) + 1;
  json rec = json::parse(text.substr(second, third - second));
  rec["lr"] = "fast";
  text.replace(second, third - second, rec.dump() + "\n");
  write_file(dir / "epochs.jsonl", text);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0],
            (dir / "epochs.jsonl").string() + ":2: skipped corrupt record (lr: expected a number, got \"fast\")");
  ASSERT_EQ(s.data.runs[0].epochs.size(), 2u);
  EXPECT_EQ(s.data.runs[0].epochs[1].epoch, 3);
}

// debug.audits "warn": the epochs whose audits failed are one warning naming the run, their
// count and the first message (in report.md's Warnings and on stderr).
TEST(Report, AuditWarningsOfARunBecomeOneWarning) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  std::string rewritten;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
    json rec = json::parse(text.substr(at, end - at));
    if (rec["epoch"] != 1)
      rec["audit_warnings"] = {
          fmt::format("update audit failed in epoch {}: parameter 'fc1.bias' did not change", rec["epoch"].get<int>())};
    rewritten += rec.dump() + "\n";
  }
  write_file(dir / "epochs.jsonl", rewritten);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0], dir.string() +
                               ": audits failed in 2 of its 3 epochs and it trained on (debug.audits warn); "
                               "the first: update audit failed in epoch 2: parameter 'fc1.bias' did not change");
  EXPECT_EQ(s.data.runs[0].epochs.size(), 3u) << "the records are kept";
  EXPECT_NE(read_file(tmp.path() / "report" / "report.md").find("audits failed in 2 of its 3 epochs"),
            std::string::npos);
}

// A diverged run's loss is NaN, which epochs.jsonl holds as null: the record is kept.
TEST(Report, NullLossReadsAsNoValue) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t last = text.rfind('\n', text.size() - 2) + 1;
  json rec = json::parse(text.substr(last));
  rec["train_loss"] = nullptr;
  text.replace(last, std::string::npos, rec.dump() + "\n");
  write_file(dir / "epochs.jsonl", text);
  const ReportData d = analyze(options_for(tmp));
  EXPECT_TRUE(d.warnings.empty());
  ASSERT_EQ(d.runs[0].epochs.size(), 3u);
  EXPECT_TRUE(std::isnan(d.runs[0].final_train_loss()));
  EXPECT_DOUBLE_EQ(d.runs[0].final_test_acc(), 0.8);
}

// A status ddplab does not write is shown as it is spelled, neither finished nor in progress.
TEST(Report, UnknownStatusIsShownNotRefused) {
  TempDir tmp;
  FakeRun r;
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.status = "paused-by-hand";
  write_run(tmp.path() / "runs", r);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.data.runs.size(), 2u);
  EXPECT_FALSE(s.data.runs[1].status.has_value());
  EXPECT_EQ(s.data.runs[1].status_text(), "paused-by-hand");
  EXPECT_EQ(s.data.groups[0].n, 1);
  EXPECT_EQ(s.data.groups[0].in_progress, 0);
  EXPECT_NE(read_file(tmp.path() / "report" / "report.html").find("<td>paused-by-hand</td>"), std::string::npos);
  EXPECT_NE(read_file(tmp.path() / "report" / "summary.csv").find(",paused-by-hand,"), std::string::npos);
}

TEST(Report, DirectoryWithoutRunsIsAClearError) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "runs" / "empty");
  try {
    write_report(options_for(tmp));
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), (tmp.path() / "runs").string() + ": no runs found (no manifest.json below it)");
  }
}

TEST(Report, EscapesUserStringsInHtmlAndSvg) {
  TempDir tmp;
  FakeRun r;
  r.name = "<script>alert('x')</script>";
  r.run_id = "seed=1";
  r.scale_rule = "a&\"b\"";
  write_run(tmp.path() / "runs", r);
  r.run_id = "seed=2";
  r.scale_rule = "<b>";
  write_run(tmp.path() / "runs", r);
  write_report(options_for(tmp));
  const std::string html = read_file(tmp.path() / "report" / "report.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("schedule.scale_rule=a&amp;&quot;b&quot;"), std::string::npos);
  const std::string svg = read_file(tmp.path() / "report" / "test_acc.svg");
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("schedule.scale_rule=&lt;b&gt;"), std::string::npos);
  // Markdown escapes a '<' with a backslash (no HTML entity): none opens a tag.
  const std::string md = read_file(tmp.path() / "report" / "report.md");
  EXPECT_NE(md.find("\\<script"), std::string::npos);
  EXPECT_FALSE(std::regex_search(md, std::regex("[^\\\\]<[A-Za-z/!]"))) << md;
}

TEST(Report, ScalingEfficiencyAgainstOneReplicaOfSamePerReplicaBatch) {
  TempDir tmp;
  for (int per_replica : {32, 128}) {
    FakeRun r;
    r.per_replica = per_replica;
    r.run_id = "b=" + std::to_string(per_replica) + ",r=1";
    r.images_per_s = per_replica == 32 ? 100 : 400;
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.run_id = "b=" + std::to_string(per_replica) + ",r=2";
    r.images_per_s = per_replica == 32 ? 180 : 600;
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 4u);
  const auto& g32 = group_labelled(d, "batch.per_replica=32, replicas.count=2");
  const auto& g128 = group_labelled(d, "batch.per_replica=128, replicas.count=2");
  ASSERT_TRUE(g32.scaling_efficiency && g128.scaling_efficiency);
  EXPECT_NEAR(*g32.scaling_efficiency, 0.9, 1e-12);    // 180 / (2 * 100)
  EXPECT_NEAR(*g128.scaling_efficiency, 0.75, 1e-12);  // 600 / (2 * 400)
  EXPECT_EQ(g32.per_replica_batch, 32);
  EXPECT_NEAR(*group_labelled(d, "batch.per_replica=32, replicas.count=1").scaling_efficiency, 1.0, 1e-12);
  // Then test_samples and test_set_se_pts: the specs name no dataset, so the schema's default,
  // fashion-mnist with its 10,000 test images.
  EXPECT_NE(render_groups_csv(d).find(",0.9,10000,"), std::string::npos) << render_groups_csv(d);
}

// Throughput that varies with the machine's load, not the setting: each group's images/s shows its
// range over seeds, and an efficiency above 1 (2 replicas at 2.5x one: 275 / (2 x 110) = 1.25) is
// flagged, not believed.
TEST(Report, ThroughputShowsItsRangeAndAnEfficiencyAboveOneIsFlagged) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.run_id = fmt::format("r=1,seed={}", seed);
    r.images_per_s = seed == 1 ? 100 : 120;
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.run_id = fmt::format("r=2,seed={}", seed);
    r.images_per_s = 275;
    write_run(tmp.path() / "runs", r);
  }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("| 110.0 (100.0–120.0) |"), std::string::npos) << md;
  EXPECT_NE(md.find("1.25 (vs replicas.count=1; above 1: the runs saw different machine loads, not a speed-up)"),
            std::string::npos)
      << md;
}

// A busy loop beside one seed: that run's host CPU wait stands out from its group's others, and
// the report says so, naming the run; runs of a quiet machine raise nothing.
TEST(Report, ARunOnABusierHostThanItsGroupsOthersIsFlagged) {
  TempDir tmp;
  for (int seed = 1; seed <= 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.host_cpu_wait_pct = seed == 2 ? 62 : 2 + seed;
    r.images_per_s = seed == 2 ? 55 : 100;
    write_run(tmp.path() / "runs", r);
  }
  ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  ASSERT_EQ(d.warnings.size(), 1u) << ::testing::PrintToString(d.warnings);
  EXPECT_EQ(d.warnings[0],
            "replicas.count=1,schedule.scale_rule=none,seed=2 (exp): the host's CPU wait was 62% while it trained, 5% "
            "over its group's 3 runs (median); its images/s and time to target measure the machine's load, not its "
            "setting (55 images/s)");
  write_report(o);
  EXPECT_NE(read_file(o.out_dir / "report.md").find("| 62% / \xE2\x80\x94 |"), std::string::npos)
      << "the runs table shows each run's host load";
  EXPECT_NE(read_file(o.out_dir / "summary.csv").find(",62,,"), std::string::npos);

  TempDir quiet;
  for (int seed = 1; seed <= 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.host_cpu_wait_pct = 3 * seed;  // 3, 6, 9: within 10 points of the others
    write_run(quiet.path() / "runs", r);
  }
  EXPECT_TRUE(analyze(options_for(quiet)).warnings.empty());
}

// Time to target that depends on the machine's load: a group whose mean is lower but whose runs
// overlap another group's is not named first; a group whose slowest run beats the other's fastest is.
TEST(Report, NoFirstToReachIsPickedInsideTheSpreadOfTheRuns) {
  TempDir tmp;
  const double walls[2][2] = {{10, 14}, {13, 15}};  // replicas 1: 20 and 28 s to epoch 2; replicas 2: 26 and 30 s
  for (int replicas = 1; replicas <= 2; ++replicas)
    for (int seed = 1; seed <= 2; ++seed) {
      FakeRun r;
      r.replicas = replicas;
      r.seed = seed;
      r.wall_per_epoch = walls[replicas - 1][seed - 1];
      write_run(tmp.path() / "runs", r);
    }
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  ReportData d = analyze(o);
  std::string html = render_html(d);
  EXPECT_EQ(html.find("First to reach"), std::string::npos) << html;
  EXPECT_NE(html.find("No group is first to reach 70.00% test accuracy beyond the spread of its runs: "
                      "replicas.count=1 (24.0 s, 20.0\xE2\x80\x93"
                      "28.0 over 2 runs) and replicas.count=2 (28.0 s, 26.0\xE2\x80\x93"
                      "30.0 over 2 runs) overlap"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("24.0 s \xE2\x86\x92 28.0 s (within the spread of the runs)"), std::string::npos) << html;

  TempDir apart;
  for (int replicas = 1; replicas <= 2; ++replicas)
    for (int seed = 1; seed <= 2; ++seed) {
      FakeRun r;
      r.replicas = replicas;
      r.seed = seed;
      r.wall_per_epoch = replicas == 1 ? 10 + seed : 20 + seed;
      write_run(apart.path() / "runs", r);
    }
  o = options_for(apart);
  o.target_acc = 0.7;
  html = render_html(analyze(o));
  EXPECT_NE(html.find("First to reach 70.00% test accuracy: replicas.count=1 (23.0 s, epoch 2.0"), std::string::npos)
      << html;
  EXPECT_NE(html.find("(A first)"), std::string::npos) << html;
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

// Identical arms that ran at different speeds (the host's load: the records are the same) are
// out of the summary's speed columns and count once in the first-to-target line and the
// recommendation, where the others are named beside the fastest; the summary says why. Before,
// "linear" was compared with "none" on speed and the two overlapped, so no group was first.
TEST(Report, IdenticalRunsAreOutOfTheSpeedComparisonsAndTheRecommendation) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.wall_per_epoch = seed == 1 ? 8 : 12;  // none: 16 and 24 s to epoch 2
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "linear";
    r.wall_per_epoch = seed == 1 ? 7 : 11;  // linear: 14 and 22 s, the same records
    r.images_per_s = 150;
    write_run(tmp.path() / "runs", r);
    r.scale_rule = "none";
    r.replicas = 2;
    r.wall_per_epoch = 20;  // 40 s: beyond the others' spread
    r.test_acc = {0.5, 0.7, 0.79};
    write_run(tmp.path() / "runs", r);
  }
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  const ReportData d = analyze(o);
  const Recommendation rec = recommend(d);
  ASSERT_NE(rec.fastest, nullptr);
  EXPECT_EQ(rec.fastest->label, "replicas.count=1, schedule.scale_rule=linear");
  ASSERT_EQ(rec.identical.size(), 1u);
  EXPECT_EQ(rec.identical[0]->label, "replicas.count=1, schedule.scale_rule=none");
  EXPECT_TRUE(rec.uncertain.empty()) << "an identical group is no competitor";
  const std::string html = render_html(d);
  EXPECT_NE(html.find("First to reach 70.00% test accuracy: replicas.count=1, schedule.scale_rule=linear"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("replicas.count=1, schedule.scale_rule=none trained bit-identically to it (identical runs), so "
                      "it is the same pick: which of them ran faster is the host&#39;s load"),
            std::string::npos)
      << html;
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  const size_t row = md.find("| schedule.scale_rule | linear \xE2\x86\x92 none");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string line = md.substr(row, md.find('\n', row) - row);
  EXPECT_EQ(line.find("\xC3\x97"), std::string::npos) << "no images/s ratio: " << line;
  EXPECT_EQ(line.find("first"), std::string::npos) << line;
  EXPECT_NE(line.find("| \xE2\x80\x94 (identical runs: host load) | \xE2\x80\x94 (identical runs: host load) |"),
            std::string::npos)
      << line;
  EXPECT_NE(md.find("its images/s and time to target are not compared, since the difference is the host's load"),
            std::string::npos);
}

// One seed of B collapsed to chance (10% on 10 classes) and one diverged: neither enters B's mean
// or the comparison, the group table and the verdict say how many of how many runs were compared,
// and the counts are compared by Fisher's exact test. Two spread seeds give a t interval (1 df)
// far past +-100 points; it is cut to the metric's range.
TEST(Report, CollapsedAndDivergedRunsAreCountedNotAveraged) {
  TempDir tmp;
  const double a_final[] = {0.80, 0.20, 0.85}, b_final[] = {0.20, 0.80, 0.10};
  for (int seed = 1; seed <= 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.test_acc = {0.5, a_final[seed - 1]};
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.test_acc = {0.5, b_final[seed - 1]};
    write_run(tmp.path() / "runs", r);
  }
  FakeRun diverged;
  diverged.replicas = 2;
  diverged.seed = 4;
  diverged.status = "diverged";
  write_run(tmp.path() / "runs", diverged);
  ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  const GroupStats& b = group_labelled(d, "replicas.count=2");
  EXPECT_EQ(b.n, 2);
  EXPECT_EQ(b.collapsed, 1);
  EXPECT_EQ(b.diverged, 1);
  EXPECT_NEAR(b.final_test_acc.mean, 0.5, 1e-12) << "the collapsed seed's 10% is not averaged in";
  EXPECT_EQ(ok_of_ended(b), "2 of 4 runs (1 collapsed, 1 diverged)");
  ASSERT_EQ(d.comparisons.size(), 1u);
  const GroupComparison& c = d.comparisons[0];
  EXPECT_EQ(c.stats.n_pairs, 2u) << "seeds 1 and 2: B's seed 3 collapsed";
  EXPECT_EQ(c.stats.ci_low, -100.0);
  EXPECT_EQ(c.stats.ci_high, 100.0);
  ASSERT_TRUE(c.bad_runs_p);
  EXPECT_NEAR(*c.bad_runs_p, 3.0 / 7, 1e-9) << "0 of 3 bad vs 2 of 4: Fisher's exact two-sided p = 3/7";
  EXPECT_NE(c.sentence.find("Compared: 3 of 3 runs of replicas.count=1, 2 of 4 runs (1 collapsed, 1 diverged) of "
                            "replicas.count=2"),
            std::string::npos)
      << c.sentence;
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("| replicas.count=2 | 2 of 4 runs (1 collapsed, 1 diverged) |"), std::string::npos) << md;
  EXPECT_NE(md.find("2 worse: 2 of 4 runs collapsed or diverged (1: 0 of 3 runs collapsed; Fisher's exact p = 0.43)"),
            std::string::npos)
      << md;
  const std::string groups = read_file(o.out_dir / "groups.csv");
  EXPECT_EQ(csv_cell(groups, 1, "group"), "replicas.count=2") << groups;
  EXPECT_EQ(csv_cell(groups, 1, "collapsed"), "1") << groups;
  EXPECT_EQ(csv_cell(groups, 1, "diverged"), "1") << groups;
  const std::string comparisons = read_file(o.out_dir / "comparisons.csv");
  EXPECT_EQ(csv_cell(comparisons, 0, "bad_runs_p"), "0.4285714286") << comparisons;
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

TEST(Report, ChanceIsJudgedByTheClassesOfTheRunsDataset) {
  // 5% test accuracy: chance for 10 classes (below 1.5 / 10), learning for CIFAR-100's 100.
  TempDir tmp;
  for (const char* dataset : {"fashion-mnist", "cifar100"}) {
    FakeRun r;
    r.run_id = dataset;
    r.test_acc = {0.03, 0.05};
    r.spec_patch = {{"dataset", {{"name", dataset}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.runs.size(), 2u);
  for (const auto& r : d.runs) {
    const bool hundred = r.run_id == "cifar100";
    EXPECT_EQ(r.classes(), hundred ? 100 : 10);
    EXPECT_EQ(r.health(), hundred ? RunHealth::kOk : RunHealth::kCollapsed) << r.run_id;
  }
}

TEST(ReportStats, FisherExactTestOfTwoCounts) {
  EXPECT_NEAR(fisher_exact_two_sided(0, 3, 2, 2), 3.0 / 7, 1e-12);
  EXPECT_NEAR(fisher_exact_two_sided(3, 0, 0, 3), 0.1, 1e-12) << "all of A, none of B: 2 / C(6, 3)";
  EXPECT_NEAR(fisher_exact_two_sided(1, 2, 1, 2), 1.0, 1e-12);
  EXPECT_EQ(fisher_exact_two_sided(0, 3, 0, 3), 1.0) << "no bad runs at all";
}

// A run that crosses the target in the middle of its third epoch: its time to target is that
// evaluation point's (step 220), not its epoch's end (step 300, 36 s). A run without points (no
// manifest step_eval) is read at epoch ends, as is one whose points are on another set than the
// report chooses on.
TEST(Report, TimeToAnAccuracyTargetIsReadAtEvaluationPointsWhenARunHasThem) {
  TempDir tmp;
  FakeRun r;
  r.test_acc = {0.5, 0.79, 0.81};
  r.steps = ddplab::testing::eval_points_every_20_steps(
      {0.3, 0.4, 0.45, 0.5, 0.52, 0.6, 0.7, 0.76, 0.78, 0.79, 0.805, 0.81, 0.82, 0.82, 0.83});
  r.manifest_patch = {{"step_eval", {{"every_steps", 20}, {"set", "test"}, {"samples", 1000}}}};
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.test_acc = {0.6, 0.85, 0.86};
  r.manifest_patch = json::object();
  write_run(tmp.path() / "runs", r);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.8;
  ReportData d = analyze(o);
  ASSERT_EQ(d.groups.size(), 1u);
  const GroupStats& g = d.groups[0];
  EXPECT_EQ(g.target_reached, 2);
  EXPECT_EQ(g.target_at_points, 1) << "seed 2's manifest names no step_eval";
  EXPECT_NEAR(g.target_steps, (220 + 200) / 2.0, 1e-9);
  EXPECT_NEAR(g.target_epochs, (2.2 + 2) / 2, 1e-9);
  EXPECT_NEAR(g.target_wall_s, (0.12 * 220 + 24) / 2, 1e-9);
  EXPECT_NEAR(g.target_samples, (220 + 200) * 64 / 2.0, 1e-9);
  EXPECT_NEAR(g.target_wall_s_min, 24, 1e-9);
  const std::string summary = render_summary_csv(d);
  EXPECT_EQ(csv_cell(summary, 0, "target_epoch"), "2.2") << summary;
  EXPECT_EQ(csv_cell(summary, 1, "target_epoch"), "2") << summary;
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("the first evaluation point at or above the target where a run has points on the test set (1 of "
                    "the runs that reached it"),
            std::string::npos)
      << md;

  r.seed = 1;  // the same points, said to be on the validation split: the report chooses on test
  r.test_acc = {0.5, 0.79, 0.81};
  r.manifest_patch = {{"step_eval", {{"every_steps", 20}, {"set", "validation"}, {"samples", 1000}}}};
  write_run(tmp.path() / "runs", r);
  d = analyze(o);
  EXPECT_EQ(d.groups[0].target_at_points, 0);
  EXPECT_NEAR(d.groups[0].target_steps, (300 + 200) / 2.0, 1e-9);
  EXPECT_NE(render_markdown(d).find("(epoch granularity)"), std::string::npos);
}

TEST(Report, TimeToTargetIsFirstEpochReachingIt) {
  TempDir tmp;
  FakeRun r;
  r.test_acc = {0.5, 0.79, 0.81, 0.78, 0.9};
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.test_acc = {0.6, 0.85, 0.86, 0.87, 0.9};
  write_run(tmp.path() / "runs", r);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.8;
  ReportData d = analyze(o);
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].target_reached, 2);
  EXPECT_NEAR(d.groups[0].target_epochs, 2.5, 1e-12);   // epochs 3 and 2
  EXPECT_NEAR(d.groups[0].target_wall_s, 30.0, 1e-12);  // 36 s and 24 s
  o.target_acc = 0.95;
  d = analyze(o);
  EXPECT_EQ(d.groups[0].target_reached, 0);
  EXPECT_NE(render_html(d).find("not reached (0/2)"), std::string::npos);
  o.target_acc.reset();  // no report.target_acc in the specs: the report chooses one
  d = analyze(o);
  EXPECT_TRUE(d.target_chosen);
}

TEST(Report, TargetFromSpecReportSection) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  json spec = json::parse(read_file(dir / "spec.json"));
  spec["report"] = {{"target_acc", 0.7}};
  write_file(dir / "spec.json", spec.dump());
  const ReportData d = analyze(options_for(tmp));
  ASSERT_TRUE(d.groups[0].target_acc);
  EXPECT_EQ(*d.groups[0].target_acc, 0.7);
  EXPECT_NEAR(d.groups[0].target_epochs, 2, 1e-12);
}

TEST(Report, RunningRunIsShownInProgress) {
  TempDir tmp;
  FakeRun r;
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.status = "running";
  r.test_acc = {0.4};
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].n, 1);
  EXPECT_EQ(d.groups[0].in_progress, 1);
  const std::string html = render_html(d);
  EXPECT_NE(html.find("<td>in progress</td>"), std::string::npos);
  EXPECT_NE(html.find("1 (+1 in progress)"), std::string::npos);
}

TEST(Report, WritesEveryFileAndFindsASingleRunDirectory) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  ReportOptions o;
  o.inputs = {dir};  // a run directory itself
  o.out_dir = tmp.path() / "out" / "nested";
  const ReportSummary s = write_report(o);
  EXPECT_EQ(s.runs, 1u);
  for (const char* f : {"report.html", "report.md", "summary.csv", "groups.csv", "comparisons.csv", "test_acc.svg",
                        "train_loss.svg", "test_loss.svg", "lr.svg", "test_acc_wall.svg", "test_acc_steps.svg",
                        "test_acc_samples.svg", "test_loss_samples.svg"})
    EXPECT_TRUE(fs::exists(o.out_dir / f)) << f;
  EXPECT_EQ(s.files.size(), 13u);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("](test_acc_wall.svg)"), std::string::npos);
  const std::string csv = read_file(o.out_dir / "summary.csv");
  EXPECT_NE(csv.find("\"replicas.count=1,schedule.scale_rule=none,seed=1\""), std::string::npos) << csv;
  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_EQ(html.find("http://", html.find("<body")), html.find("http://www.w3.org/2000/svg", html.find("<body")));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(ReportSvg, LogTicksCoverRangeAtOneTwoFive) {
  EXPECT_EQ(log_ticks(30, 900), (std::vector<double>{20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(log_ticks(100, 100), (std::vector<double>{100, 200}));
  // More than 3 decades: powers of ten only.
  EXPECT_EQ(log_ticks(3, 40000), (std::vector<double>{1, 10, 100, 1000, 10000, 100000}));
  EXPECT_TRUE(log_ticks(0, 10).empty());
}

TEST(ReportSvg, LogAxisAndReferenceLine) {
  LineChart chart;
  chart.id = "ns";
  chart.log_y = true;
  ChartSeries s;
  s.label = "g";
  s.x = {1, 2, 3};
  s.y = {100, -5, 1000};  // a non-positive value cannot be drawn on a log axis
  s.reference_y = 10;
  chart.series.push_back(s);
  const std::string svg = render_svg(chart);
  EXPECT_NE(svg.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(svg.find(">10</text>"), std::string::npos) << "the reference widens the axis down to 10";
  EXPECT_NE(svg.find(">1000</text>"), std::string::npos);
  // Two drawn points (the negative one is skipped): one L segment.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("class=\"line\" d=\"([^\"]*)\"")));
  const std::string path = m[1].str();
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 1) << path;
}

TEST(Report, LabelsLeaveOutKeysAGroupDoesNotSet) {
  TempDir tmp;
  const std::vector<json> syncs = {"allreduce", json::parse(R"({"local_sgd": {"period": 4, "start_epoch": 1}})"),
                                   json::parse(R"({"local_sgd": {"period": 16, "start_epoch": 1}})")};
  for (size_t i = 0; i < syncs.size(); ++i) {
    FakeRun r;
    r.replicas = 4;
    r.run_id = "sync" + std::to_string(i);
    const fs::path dir = write_run(tmp.path() / "runs", r);
    json spec = json::parse(read_file(dir / "spec.json"));
    spec["replicas"]["sync"] = syncs[i];
    write_file(dir / "spec.json", spec.dump());
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 3u);
  group_labelled(d, "replicas.sync=allreduce");
  group_labelled(d, "replicas.sync.local_sgd.period=4, replicas.sync.local_sgd.start_epoch=1");
  group_labelled(d, "replicas.sync.local_sgd.period=16, replicas.sync.local_sgd.start_epoch=1");
  // The two local SGD groups differ in one key and are compared.
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "replicas.sync.local_sgd.period");
}

TEST(Report, ZippedSettingsAreComparedAsOneChoice) {
  // sweep_zip {optimizer.name: [sgd, adam], optimizer.lr: [0.05, 0.001]} x replicas.count [1, 2]:
  // the optimizer and its lr always change together, so they are one setting, compared as one.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2})
      for (const auto& [name, lr] : {std::pair{"sgd", 0.05}, std::pair{"adam", 0.001}}) {
        FakeRun r;
        r.seed = seed;
        r.replicas = replicas;
        r.run_id = fmt::format("{}-r{}-s{}", name, replicas, seed);
        r.spec_patch = {{"optimizer", {{"name", name}, {"lr", lr}}}};
        r.test_acc = {std::string(name) == "adam" ? 0.80 + 0.01 * seed : 0.85 + 0.0105 * seed};
        write_run(tmp.path() / "runs", r);
      }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.settings.size(), 2u);
  EXPECT_EQ(d.settings[0].name, "optimizer.lr + optimizer.name");
  EXPECT_EQ(d.settings[1].name, "replicas.count");
  group_labelled(d, "optimizer.lr=0.001, optimizer.name=adam, replicas.count=2");
  ASSERT_EQ(d.comparisons.size(), 4u) << "two optimizer changes, two replica changes";
  const auto changes = summary_changes(d);
  ASSERT_EQ(changes.size(), 4u);
  const GroupComparison& first = d.comparisons[changes[0].comparison];
  EXPECT_EQ(first.key, "optimizer.lr + optimizer.name");
  EXPECT_EQ(first.value_a + " > " + first.value_b, "0.001, adam > 0.05, sgd");
  EXPECT_EQ(changes[0].at, "replicas.count=1");
  EXPECT_EQ(first.stats.verdict, Verdict::b_better) << "5.05 and 5.10 points";
  EXPECT_EQ(changes[2].at, "optimizer.lr=0.001, optimizer.name=adam");
  EXPECT_NE(render_markdown(d).find("| optimizer.lr + optimizer.name | 0.001, adam \xE2\x86\x92 0.05, sgd |"),
            std::string::npos)
      << render_markdown(d);
  EXPECT_NE(
      render_html(d).find(
          "<code>optimizer.lr + optimizer.name</code> (keys that always change together: compared as one setting)."),
      std::string::npos);
}

TEST(Report, ALayerListIsNamedByTheKeysTheSweepChanged) {
  // model.layers at two widths (sweep_zip of model.layers.0.channels and model.layers.3.channels):
  // the labels and the comparison name those keys, not the whole list.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (const auto& [c0, c3] : {std::pair{8, 16}, std::pair{32, 64}}) {
      FakeRun r;
      r.seed = seed;
      r.run_id = fmt::format("w{}-s{}", c0, seed);
      r.spec_patch = {{"model",
                       {{"layers", json::array({{{"type", "conv"}, {"channels", c0}, {"kernel", 3}},
                                                {{"type", "relu"}},
                                                {{"type", "max_pool"}, {"kernel", 2}},
                                                {{"type", "conv"}, {"channels", c3}, {"kernel", 3}},
                                                {{"type", "flatten"}},
                                                {{"type", "linear"}, {"features", 10}}})}}}};
      write_run(tmp.path() / "runs", r);
    }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 2u);
  group_labelled(d, "model.layers.0.channels=8, model.layers.3.channels=16");
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "model.layers.0.channels + model.layers.3.channels");
  EXPECT_EQ(d.comparisons[0].value_a + " > " + d.comparisons[0].value_b, "8, 16 > 32, 64");
  EXPECT_EQ(csv_cell(render_groups_csv(d), 1, "model.layers.3.channels"), "64");
}

TEST(Report, NoiseScaleVerdictFollowsTheStepsModel) {
  // steps ~ 1 + B_noise / B: at B = B_noise doubling saves 1 - 1.5 / 2 = 25% of the steps for 50%
  // more samples; far below it saves almost half; far above almost nothing.
  auto v = noise_scale_verdict(512, 512);
  EXPECT_NEAR(v.ratio, 1.0, 1e-12);
  EXPECT_NEAR(v.steps_saved, 0.25, 1e-12);
  EXPECT_NEAR(v.samples_added, 0.5, 1e-12);
  EXPECT_NE(v.sentence.find("above B_noise, where more replicas should cut the steps less and less"), std::string::npos)
      << v.sentence;
  EXPECT_NE(v.sentence.find("predicted from B_noise alone"), std::string::npos) << "a prediction, said as one";
  v = noise_scale_verdict(64, 6400);
  EXPECT_NEAR(v.steps_saved, 1 - (1 + 50.0) / (1 + 100.0), 1e-12);
  EXPECT_GT(v.steps_saved, 0.49);
  EXPECT_NE(v.sentence.find("far below B_noise, where more replicas should cut the steps almost linearly"),
            std::string::npos);
  EXPECT_NE(v.sentence.find("global batch 64 is 0.01 x B_noise (~6400)"), std::string::npos) << v.sentence;
  v = noise_scale_verdict(4096, 256);
  EXPECT_LT(v.steps_saved, 0.04);
  EXPECT_NE(v.sentence.find("far above B_noise, where more replicas should buy almost nothing"), std::string::npos);
  EXPECT_NE(noise_scale_verdict(256, 512).sentence.find(" below B_noise, where more replicas should still cut"),
            std::string::npos);
}

TEST(Report, NoiseScaleChartMarksEachGroupsGlobalBatch) {
  TempDir tmp;
  FakeRun one;  // one replica: no noise scale
  write_run(tmp.path() / "runs", one);
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun small;
    small.replicas = 2;
    small.per_replica = 32;  // global 64
    small.seed = seed;
    small.noise_scale = {200, 500, 800 + 100.0 * seed};
    write_run(tmp.path() / "runs", small);
    FakeRun big;
    big.replicas = 4;
    big.per_replica = 256;  // global 1024
    big.seed = seed;
    big.noise_scale = {NAN, 100, 150};
    write_run(tmp.path() / "runs", big);
  }
  ReportOptions o = options_for(tmp);
  const ReportSummary s = write_report(o);
  const auto& d = s.data;
  const auto& small = group_labelled(d, "batch.per_replica=32, replicas.count=2");
  const auto& big = group_labelled(d, "batch.per_replica=256, replicas.count=4");
  EXPECT_EQ(small.global_batch, 64);
  EXPECT_NEAR(small.noise_scale_first, 200, 1e-9);
  EXPECT_NEAR(small.noise_scale_last, 950, 1e-9);  // mean of 900 and 1000
  EXPECT_NEAR(big.noise_scale_first, 100, 1e-9) << "the first epoch that has one";
  EXPECT_TRUE(std::isnan(group_labelled(d, "batch.per_replica=64, replicas.count=1").noise_scale_last));

  TempDir local;
  FakeRun stopped_reducing;  // local SGD from epoch 2: no estimate after epoch 1
  stopped_reducing.replicas = 2;
  stopped_reducing.noise_scale = {40, NAN, NAN};
  write_run(local.path() / "runs", stopped_reducing);
  const ReportData dl = analyze(options_for(local));
  EXPECT_NEAR(dl.groups[0].noise_scale_first, 40, 1e-9);
  EXPECT_TRUE(std::isnan(dl.groups[0].noise_scale_last)) << "epoch 1's estimate does not describe the end";
  EXPECT_EQ(render_markdown(dl).find("how many replicas pay off?"), std::string::npos);

  const std::string svg = read_file(o.out_dir / "noise_scale.svg");
  size_t refs = 0;
  for (size_t at = svg.find("class=\"reference\""); at != std::string::npos;
       at = svg.find("class=\"reference\"", at + 1))
    ++refs;
  EXPECT_EQ(refs, 2u) << "one dashed global-batch line per group with a noise scale";
  EXPECT_NE(svg.find("(global batch 1024)"), std::string::npos);
  EXPECT_EQ(svg.find("replicas.count=1"), std::string::npos) << "groups without a noise scale are left out";

  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_NE(html.find("how many replicas pay off?"), std::string::npos);
  EXPECT_NE(html.find("global batch 64 is 0.067 x B_noise (~950): far below B_noise"), std::string::npos);
  EXPECT_NE(html.find("global batch 1024 is 6.8 x B_noise (~150): far above B_noise"), std::string::npos);
  EXPECT_NE(html.find("<td>47% / no report.target_loss</td>"), std::string::npos)
      << "the prediction stands beside the measurement, or says why there is none";
  EXPECT_NE(read_file(o.out_dir / "report.md").find("](noise_scale.svg)"), std::string::npos);
  EXPECT_NE(read_file(o.out_dir / "groups.csv").find(",64,200,950,"), std::string::npos)
      << read_file(o.out_dir / "groups.csv");
  EXPECT_FALSE(fs::exists(o.out_dir / "test_acc_comm.svg")) << "no comm_bytes in these records";
}

TEST(Report, NoiseScaleGuardLeavesOutCollapsedRunsAndLowLrEpochs) {
  TempDir tmp;
  FakeRun good;  // 12 epochs, lr 0.01 / epoch: epochs 11 and 12 are below 10% of the peak
  good.replicas = 2;
  for (int e = 1; e <= 12; ++e) {
    good.test_acc.push_back(0.8);
    good.noise_scale.push_back(100.0 * e);
  }
  good.test_acc.resize(12);
  write_run(tmp.path() / "runs", good);
  FakeRun collapsed = good;  // ended at chance (10 classes): its estimate is left out
  collapsed.seed = 2;
  collapsed.test_acc.assign(12, 0.1);
  collapsed.noise_scale.assign(12, 5.0);
  write_run(tmp.path() / "runs", collapsed);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].noise_scale_runs_left_out, 1);
  EXPECT_NEAR(d.groups[0].noise_scale_first, 100, 1e-9);
  EXPECT_NEAR(d.groups[0].noise_scale_last, 1000, 1e-9) << "epoch 10, the last with lr >= 10% of the peak";
  EXPECT_NE(render_markdown(d).find("global batch 128 is 0.13 x B_noise (~1000)"), std::string::npos)
      << render_markdown(d);

  TempDir neg;
  FakeRun noisy;  // the |G|^2 estimate is not positive at the end
  noisy.replicas = 2;
  noisy.noise_scale = {300, 400, NAN};
  noisy.grad_sq = {0.5, 0.2, -0.01};
  write_run(neg.path() / "runs", noisy);
  const ReportData dn = analyze(options_for(neg));
  EXPECT_TRUE(std::isnan(dn.groups[0].noise_scale_last));
  EXPECT_EQ(noise_scale_sentence(dn.groups[0]).rfind("not reliable here (the |G|", 0), 0u)
      << noise_scale_sentence(dn.groups[0]);
  EXPECT_NE(render_html(dn).find("not reliable here"), std::string::npos);

  TempDir tiny;
  FakeRun huge = noisy;  // B_simple 100000 at global batch 128: |G|^2 near zero
  huge.noise_scale = {300, 400, 1e5};
  huge.grad_sq = {0.5, 0.2, 1e-6};
  write_run(tiny.path() / "runs", huge);
  EXPECT_NE(noise_scale_sentence(analyze(options_for(tiny)).groups[0])
                .find("not reliable here (the |G|\xC2\xB2 estimate is near zero"),
            std::string::npos);
}

TEST(ReportSvg, ARangeAtRoundingLevelIsOneValue) {
  // The mean of three runs' lr 0.1 is 0.10000000000000002: the axis must still have distinct ticks.
  const auto ticks = nice_ticks(0.1, (0.1 + 0.1 + 0.1) / 3);
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_LT(ticks.front(), 0.1);
  EXPECT_GT(ticks.back(), 0.1);
  LineChart chart;
  chart.id = "flat";
  ChartSeries s;
  s.label = "flat";
  s.x = {1, 2, 3};
  s.y = {0.1, (0.1 + 0.1 + 0.1) / 3, 0.1};
  chart.series.push_back(s);
  EXPECT_NO_THROW(render_svg(chart));
}

TEST(ReportSvg, SixteenGroupLegendStaysInsideTheViewBox) {
  LineChart chart;
  chart.id = "many";
  chart.title = "many groups";
  for (int k = 0; k < 16; ++k) {
    ChartSeries s;
    s.label = fmt::format(
        "replicas.count={}, schedule.scale_rule=linear, optimizer.lr=0.{}5, batch.per_replica=256, "
        "replicas.sync.local_sgd.period=16, replicas.sync.local_sgd.start_epoch=1",
        k, k);
    s.x = {1, 2};
    s.y = {0.5, 0.6};
    chart.series.push_back(s);
  }
  const std::string svg = render_svg(chart);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("viewBox=\"0 0 ([0-9.]+) ([0-9.]+)\"")));
  const double width = std::stod(m[1].str()), height = std::stod(m[2].str());
  // Every legend line: its baseline inside the height, and at 7.5 px per character (generous for
  // 12 px sans-serif) its end inside the width.
  const std::regex line(
      "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\">([^<]*)|<tspan x=\"([0-9.]+)\" dy=\"([0-9.]+)\">([^<]*)");
  size_t lines = 0, groups = 0;
  double y = 0;
  std::string all;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& t = *it;
    const bool tspan = t[4].matched;
    const double x = std::stod(tspan ? t[4].str() : t[1].str());
    y = tspan ? y + std::stod(t[5].str()) : std::stod(t[2].str());
    const std::string text = tspan ? t[6].str() : t[3].str();
    if (text.find("replicas.") == std::string::npos && !tspan) continue;  // ticks, title, axis labels
    groups += tspan ? 0 : 1;
    ++lines;
    all += text + " ";
    EXPECT_LE(x + 7.5 * static_cast<double>(text.size()), width) << text;
    EXPECT_LE(y + 4, height) << text;
  }
  EXPECT_EQ(groups, 16u);
  EXPECT_GT(lines, 16u) << "long labels wrap";
  EXPECT_NE(all.find("replicas.count=15, schedule.scale_rule=linear"), std::string::npos) << "no text is lost";
  EXPECT_NE(all.find("start_epoch=1"), std::string::npos);
}

TEST(Report, TestAccuracyAgainstCumulativeCommunicatedBytes) {
  TempDir tmp;
  FakeRun r;
  r.replicas = 2;
  r.comm_bytes = 2e6;  // every epoch
  r.test_acc = {0.5, 0.7, 0.8};
  write_run(tmp.path() / "runs", r);
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string svg = read_file(o.out_dir / "test_acc_comm.svg");
  EXPECT_NE(svg.find("MB sent by rank 0 so far"), std::string::npos);
  // x = 2, 4, 6 MB (cumulative): the axis runs from 2.0 to 6.0.
  EXPECT_NE(svg.find(">2.0</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">6.0</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find(">6.5</text>"), std::string::npos) << svg;
  EXPECT_NE(read_file(o.out_dir / "report.md").find("](test_acc_comm.svg)"), std::string::npos);
  EXPECT_NE(read_file(o.out_dir / "groups.csv").find(",6000000,"), std::string::npos);
}

TEST(ReportBrowser, ChromiumDrawsChartsWithoutConsoleErrors) {
  if (run_command("command -v chromium").exit_code != 0) {
    if (ddplab::testing::required_by_environment("DDPLAB_REQUIRE_BROWSER"))
      FAIL() << "chromium not installed (scripts/test.sh installs it)";
    GTEST_SKIP() << "chromium not installed";
  }
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.images_per_s = 100.0 * replicas * 0.9;
      r.test_acc = {0.5 + 0.01 * seed, 0.7, 0.8 - 0.01 * replicas * (1 + 0.1 * seed)};
      // A long display name: its legend lines must wrap inside every chart, as Chromium measures them.
      r.spec_patch = {{"report",
                       {{"labels",
                         {{"replicas.count=2",
                           "two replicas on two processes of one node, per-replica "
                           "batch 64, linear lr scaling off, all-reduce every step"}}}}}};
      write_run(tmp.path() / "runs", r);
    }
  ReportOptions options = options_for(tmp);
  options.target_acc = 0.7;
  write_report(options);
  const std::string html = (tmp.path() / "report" / "report.html").string();
  const std::string flags =
      "chromium --headless --no-sandbox --disable-gpu --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync ";
  const auto dom = run_command("timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile1") +
                               " --dump-dom file://" + html + " 2>/dev/null");
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  for (const char* id : {"test_acc", "train_loss", "test_loss", "lr", "test_acc_wall", "acc_vs_batch",
                         "throughput_vs_replicas", "target_time_vs_replicas"}) {
    const std::string open = std::string("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-") + id + "\"";
    const size_t start = dom.output.find(open);
    ASSERT_NE(start, std::string::npos) << id;
    const std::string svg = dom.output.substr(start, dom.output.find("</svg>", start) - start);
    std::regex drawn("<path[^>]*class=\"line\"[^>]* d=\"M[0-9.]+,[0-9.]+ L");
    EXPECT_TRUE(std::regex_search(svg, drawn)) << id;
  }
  // One colour per group: the colour key's colour of each group is its legend colour in every
  // chart that names it (as Chromium parsed the page).
  std::map<std::string, std::string> key;
  const std::regex swatch(
      "<span class=\"swatch\" style=\"background:\\s*(#[0-9A-Fa-f]{6}|rgb[^;\"]*);?\"></span>([^<]*)<");
  for (auto it = std::sregex_iterator(dom.output.begin(), dom.output.end(), swatch); it != std::sregex_iterator(); ++it)
    key[(*it)[2].str()] = (*it)[1].str();
  ASSERT_EQ(key.size(), 2u) << dom.output.substr(0, 4000);
  const std::regex legend(
      "<g class=\"legend\"><line [^>]*stroke=\"(#[0-9A-Fa-f]{6})\"[^>]*>(</line>)?<text [^>]*>([^<]*)");
  size_t matched = 0;
  for (auto it = std::sregex_iterator(dom.output.begin(), dom.output.end(), legend); it != std::sregex_iterator();
       ++it) {
    // A long label wraps: its first line starts the group's label.
    const std::string first_line = (*it)[3].str();
    const auto k = std::find_if(key.begin(), key.end(), [&](const auto& kv) {
      return !first_line.empty() && kv.first.rfind(first_line, 0) == 0;
    });
    if (k == key.end()) continue;
    ++matched;
    EXPECT_EQ(k->second.front() == '#' ? k->second : std::string(), (*it)[1].str()) << (*it)[3].str();
  }
  EXPECT_GE(matched, 16u) << "both groups in the 8 per-epoch charts";
  // Units: accuracy in percent, epochs in whole numbers.
  const size_t acc_at = dom.output.find("id=\"chart-test_acc\"");
  const std::string acc = dom.output.substr(acc_at, dom.output.find("</svg>", acc_at) - acc_at);
  EXPECT_NE(acc.find("test accuracy (%)"), std::string::npos);
  const std::regex y_tick("text-anchor=\"end\">([0-9.]+)</text>"), x_tick("text-anchor=\"middle\">([0-9.]+)</text>");
  for (auto it = std::sregex_iterator(acc.begin(), acc.end(), y_tick); it != std::sregex_iterator(); ++it)
    EXPECT_GE(std::stod((*it)[1].str()), 10) << "a percent, not a fraction";
  for (auto it = std::sregex_iterator(acc.begin(), acc.end(), x_tick); it != std::sregex_iterator(); ++it)
    EXPECT_EQ((*it)[1].str().find('.'), std::string::npos) << "an epoch tick " << (*it)[1].str();
  const size_t thr_at = dom.output.find("id=\"chart-throughput_vs_replicas\"");
  const std::string thr = dom.output.substr(thr_at, dom.output.find("</svg>", thr_at) - thr_at);
  size_t replica_ticks = 0;
  for (auto it = std::sregex_iterator(thr.begin(), thr.end(), x_tick); it != std::sregex_iterator();
       ++it, ++replica_ticks)
    EXPECT_EQ((*it)[1].str().find('.'), std::string::npos) << "a replica tick " << (*it)[1].str();
  EXPECT_EQ(replica_ticks, 2u) << "replicas 1 and 2, nothing between";
  const size_t batch_at = dom.output.find("id=\"chart-acc_vs_batch\"");
  EXPECT_NE(dom.output.substr(batch_at, dom.output.find("</svg>", batch_at) - batch_at).find("final test accuracy (%)"),
            std::string::npos);
  // The comparisons table renders its 95% CI column with an interval in it.
  const size_t table = dom.output.find("<table class=\"significance\">");
  ASSERT_NE(table, std::string::npos) << dom.output;
  const std::string sig = dom.output.substr(table, dom.output.find("</table>", table) - table);
  EXPECT_NE(sig.find("<th>95% CI</th>"), std::string::npos) << sig;
  EXPECT_NE(sig.find("<th>adjusted p</th>"), std::string::npos) << sig;
  EXPECT_TRUE(std::regex_search(sig, std::regex("<td>[+-][0-9]+\\.[0-9]{2} to [+-][0-9]+\\.[0-9]{2}</td>"))) << sig;
  // The summary comes first and holds a row per change, with its interval.
  const size_t summary = dom.output.find("<table class=\"summary\">");
  ASSERT_NE(summary, std::string::npos) << dom.output;
  EXPECT_LT(summary, table);
  const std::string sum = dom.output.substr(summary, dom.output.find("</table>", summary) - summary);
  EXPECT_NE(sum.find("<td>replicas.count</td><td>1 \xE2\x86\x92 2</td>"), std::string::npos) << sum;
  EXPECT_TRUE(std::regex_search(sum, std::regex("<td>[+-][0-9]+\\.[0-9]{2} pts \\([+-][0-9.]+ to [+-][0-9.]+\\)</td>")))
      << sum;
  // No legend text clips: a copy of the page with a script (the report has none) that asks
  // Chromium for every legend line's box and writes what sticks out of its chart.
  const std::string page = read_file(html);
  const std::string probe =
      "<script>let n = 0, out = [];"
      "for (const svg of document.querySelectorAll('svg.chart')) {"
      "  const w = svg.viewBox.baseVal.width, h = svg.viewBox.baseVal.height;"
      "  for (const t of svg.querySelectorAll('g.legend text')) {"
      "    const b = t.getBBox(); ++n;"
      "    if (b.x < 0 || b.x + b.width > w || b.y + b.height > h) out.push(svg.id + ': ' + t.textContent);"
      "  }"
      "}"
      "const pre = document.createElement('pre'); pre.id = 'clip-check';"
      "pre.textContent = 'legends ' + n + ' clipped ' + out.length + ' ' + out.join(' | ');"
      "document.body.appendChild(pre);</script>";
  write_file(tmp.path() / "probe.html", page.substr(0, page.rfind("</body>")) + probe + "</body></html>\n");
  const auto measured = run_command("timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile3") +
                                    " --dump-dom file://" + tmp.str("probe.html") + " 2>/dev/null");
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  std::smatch clip;
  ASSERT_TRUE(std::regex_search(measured.output, clip, std::regex("legends ([0-9]+) clipped ([0-9]+)([^<]*)")))
      << measured.output.substr(measured.output.size() > 2000 ? measured.output.size() - 2000 : 0);
  const size_t legends = count_of(page, "<g class=\"legend\">");
  EXPECT_GT(legends, 10u);
  EXPECT_EQ(static_cast<size_t>(std::stoi(clip[1].str())), legends) << "every legend entry was measured";
  EXPECT_EQ(clip[2].str(), "0") << clip[3].str();
  const auto shot = run_command(
      "timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile2") +
      " --enable-logging=stderr --v=0 --window-size=1200,2000 --screenshot=" + tmp.str("shot.png") + " file://" + html);
  EXPECT_EQ(shot.exit_code, 0) << shot.output;
  EXPECT_TRUE(fs::exists(tmp.path() / "shot.png")) << shot.output;
  EXPECT_EQ(shot.output.find("Uncaught"), std::string::npos) << shot.output;
  EXPECT_EQ(shot.output.find("CONSOLE"), std::string::npos) << shot.output;
}

namespace {
// Step records every 10 steps whose training loss falls as 2 - step / s_target, so the first one
// at or below 1.0 is the first at step >= s_target.
std::vector<json> falling_steps(int64_t s_target, int64_t global_batch) {
  std::vector<json> out;
  for (int64_t step = 10; step <= 3 * s_target; step += 10)
    out.push_back({{"step", step},
                   {"epoch", step / 100.0},
                   {"interval_steps", 10},
                   {"lr", 0.1},
                   {"train_loss", 2.0 - static_cast<double>(step) / static_cast<double>(s_target)},
                   {"train_acc", 0.5},
                   {"samples", step * global_batch},
                   {"elapsed_s", step * 0.01}});
  return out;
}

// Groups of replicas 1, 2 and 4 (per-replica batch 64), 3 seeds each; more replicas lose
// `drop` points per doubling, with a seed offset common to every group.
void write_replica_sweep(const TempDir& tmp, double drop) {
  for (int seed = 1; seed <= 3; ++seed)
    for (int replicas : {1, 2, 4}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.images_per_s = 100.0 * replicas * (replicas == 4 ? 0.8 : 1.0);
      const double doublings = std::log2(replicas);
      // The drop varies a little with the seed: a paired t test needs a spread of the differences.
      r.test_acc = {0.5, 0.7, 0.8 + 0.01 * seed - drop * doublings * (1 + 0.1 * seed)};
      write_run(tmp.path() / "runs", r);
    }
}
}  // namespace

TEST(ReportAxes, TheTradeoffFitRecoversAKnownCriticalBatch) {
  std::vector<double> batch, steps;
  for (double b : {32.0, 64.0, 128.0, 256.0, 512.0, 1024.0}) {
    batch.push_back(b);
    steps.push_back(1000 * (1 + 300 / b));
  }
  auto fit = fit_batch_tradeoff(batch, steps);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->b_crit, 300, 1e-6);
  EXPECT_NEAR(fit->s_min, 1000, 1e-6);
  EXPECT_NEAR(fit->e_min, 300000, 1e-3);
  EXPECT_NEAR(fit->samples(300), 600000, 1e-3) << "E = E_min (1 + B / B_crit)";
  // +-2% alternating noise on the steps moves B_crit by a few percent only.
  for (size_t i = 0; i < steps.size(); ++i) steps[i] *= i % 2 ? 1.02 : 0.98;
  fit = fit_batch_tradeoff(batch, steps);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->b_crit, 300, 30);
  EXPECT_FALSE(fit_batch_tradeoff({64, 64}, {100, 120})) << "one distinct batch";
  EXPECT_FALSE(fit_batch_tradeoff({64, 128}, {100, 120})) << "steps that grow with the batch are not the model";
}

TEST(ReportAxes, NoFitWhereSamplesToTargetFallAsTheBatchGrows) {
  const std::vector<double> batch{32, 256, 512};
  const std::vector<double> steps{20000, 2000, 1500};  // 640,000, 512,000, 768,000 samples
  EXPECT_FALSE(fit_batch_tradeoff(batch, steps));
  EXPECT_EQ(tradeoff_refusal(batch, steps),
            "samples to target fall from 640000 at batch 32 to 512000 at batch 256, where McCandlish's model has them "
            "grow: the smaller batch was held back by something else (an lr tuned for another batch?)");
  EXPECT_EQ(tradeoff_refusal({32, 64}, {1000 * (1 + 300 / 32.0), 1000 * (1 + 300 / 64.0)}), "");
}

// Runs that follow McCandlish's model with B_crit = 300: after s steps of batch B the expected
// loss is 2.3 exp(-s / (T (1 + 300 / B))), T set so that S_min = 2000 steps to the target 0.45,
// and each 5-step record adds noise of 1.5 / sqrt(its samples) (per-sample noise averaged). Steps
// to the target read from the curve recover B_crit within 25%; the first record at or below the
// target, the rule before 2026-12-04, lands on noise dips at the small batches and does not.
std::vector<rundir::StepRecord> mccandlish_steps(double batch, std::mt19937& rng) {
  constexpr double kBcrit = 300, kSmin = 2000, kL0 = 2.3, kTarget = 0.45, kNoise = 1.5;
  constexpr int kEvery = 5;
  const double t = kSmin / std::log(kL0 / kTarget), stretch = 1 + kBcrit / batch;
  std::normal_distribution<double> noise(0, kNoise / std::sqrt(kEvery * batch));
  std::vector<rundir::StepRecord> out;
  for (int64_t end = kEvery; end <= 2 * kSmin * stretch; end += kEvery) {
    double loss = 0;
    for (int64_t s = end - kEvery + 1; s <= end; ++s) loss += kL0 * std::exp(-s / (t * stretch)) / kEvery;
    rundir::StepRecord r;
    r.step = end;
    r.interval_steps = kEvery;
    r.samples = end * static_cast<int64_t>(batch);
    r.train_loss = loss + noise(rng);
    out.push_back(r);
  }
  return out;
}

TEST(ReportAxes, StepsToALossReadFromTheCurveRecoverAKnownCriticalBatch) {
  const std::vector<double> batches{32, 64, 128, 256, 512, 1024};
  for (unsigned seed = 1; seed <= 3; ++seed) {
    std::mt19937 rng(seed);
    std::vector<double> from_curve, first_record;
    for (double b : batches) {
      RunData run;
      run.steps = mccandlish_steps(b, rng);
      const auto* reached = run.steps_to_loss(0.45);
      ASSERT_NE(reached, nullptr) << "batch " << b;
      from_curve.push_back(static_cast<double>(reached->step));
      const auto first =
          std::find_if(run.steps.begin(), run.steps.end(), [](const auto& r) { return r.train_loss <= 0.45; });
      first_record.push_back(static_cast<double>(first->step));
    }
    const auto fit = fit_batch_tradeoff(batches, from_curve);
    ASSERT_TRUE(fit) << "seed " << seed << ": " << tradeoff_refusal(batches, from_curve);
    EXPECT_NEAR(fit->b_crit, 300, 75) << "seed " << seed;
    const auto before = fit_batch_tradeoff(batches, first_record);
    EXPECT_TRUE(!before || std::abs(before->b_crit - 300) > 75)
        << "seed " << seed << ": the first-record rule fits " << before->b_crit << ", so this test would not tell";
  }
}

// The summary names each change between neighbouring replica counts once (1 -> 2, 2 -> 4, not
// 1 -> 4), with the paired verdict, the throughput ratio and who reached the target first.
TEST(ReportAxes, TheSummaryOpensWithWhatEachSweptSettingDid) {
  TempDir tmp;
  write_replica_sweep(tmp, 0.02);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  const ReportData d = analyze(o);
  const auto changes = summary_changes(d);
  ASSERT_EQ(changes.size(), 2u);
  const auto& first = d.comparisons[changes[0].comparison];
  const auto& second = d.comparisons[changes[1].comparison];
  EXPECT_EQ(first.key, "replicas.count");
  EXPECT_EQ(first.value_a + ">" + first.value_b, "1>2");
  EXPECT_EQ(second.value_a + ">" + second.value_b, "2>4");
  EXPECT_EQ(changes[0].at, "") << "nothing else is swept";
  EXPECT_EQ(first.stats.verdict, Verdict::b_worse) << "2.2 to 2.6 points lower in every seed";
  const std::string html = render_html(d);
  const size_t summary = html.find("<h2 id=\"summary\">");
  ASSERT_NE(summary, std::string::npos);
  EXPECT_LT(summary, html.find("<h2>Groups</h2>")) << "the answer comes first";
  EXPECT_NE(html.find("<td>1 \xE2\x86\x92 2</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>-2.40 pts (-2.90 to -1.90)</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>2 worse</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>1.60\xC3\x97</td>"), std::string::npos) << "images/s 320 / 200";
  EXPECT_NE(html.find("No group is first to reach 70.00% test accuracy beyond the spread of its runs"),
            std::string::npos)
      << "every group reached it at 24 s: a tie names no group first";
  EXPECT_NE(render_markdown(d).find("## Summary: what each swept setting did"), std::string::npos);
}

TEST(ReportAxes, ChartsAgainstTheSweptSettings) {
  TempDir tmp;
  write_replica_sweep(tmp, 0.02);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  write_report(o);
  // Accuracy vs global batch 64, 128, 256 on a log2 axis with 95% interval bars.
  const std::string acc = read_file(o.out_dir / "acc_vs_batch.svg");
  for (const char* tick : {">64</text>", ">128</text>", ">256</text>"})
    EXPECT_NE(acc.find(tick), std::string::npos) << tick;
  EXPECT_EQ(acc.find(">96</text>"), std::string::npos) << "no linear ticks";
  EXPECT_NE(acc.find("class=\"error-bar\""), std::string::npos);
  // Images/s vs replicas with the ideal line from 1 replica: 100, 200, 400.
  const std::string thr = read_file(o.out_dir / "throughput_vs_replicas.svg");
  EXPECT_NE(thr.find("ideal linear scaling from 1 replica"), std::string::npos);
  EXPECT_NE(thr.find("stroke-dasharray=\"8,4\""), std::string::npos);
  EXPECT_NE(thr.find(">400</text>"), std::string::npos) << "the ideal line reaches 4 x 100";
  EXPECT_TRUE(fs::exists(o.out_dir / "target_time_vs_replicas.svg"));
  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_LT(html.find("id=\"chart-acc_vs_batch\""), html.find("<h2>Groups</h2>"));
}

// Step records give steps to report.target_loss; across global batches 64..512 with steps that
// follow S = 1000 (1 + 300 / B), the trade-off chart's fit finds B_crit = 300.
TEST(ReportAxes, StepRecordsGiveStepsToTargetLossAndTheTradeoffFit) {
  TempDir tmp;
  for (int per_replica : {64, 128, 256, 512})
    for (int seed = 1; seed <= 2; ++seed) {
      FakeRun r;
      r.seed = seed;
      r.per_replica = per_replica;
      r.run_id = fmt::format("b={},seed={}", per_replica, seed);
      const auto s_target = static_cast<int64_t>(std::llround(1000 * (1 + 300.0 / per_replica) / 10) * 10);
      r.steps = falling_steps(s_target, per_replica);
      r.spec_patch = {{"report", {{"target_loss", 1.0}}}};
      write_run(tmp.path() / "runs", r);
    }
  ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  ASSERT_EQ(d.groups.size(), 4u);
  ASSERT_TRUE(d.target_loss);
  const auto& g64 = group_labelled(d, "batch.per_replica=64");
  EXPECT_EQ(g64.target_loss_reached, 2);
  EXPECT_NEAR(g64.target_loss_steps, 5690, 1e-9);  // 1000 (1 + 300 / 64) = 5687.5, on the 10-step grid
  EXPECT_NEAR(g64.target_loss_samples, 5690.0 * 64, 1e-6);
  ASSERT_TRUE(g64.measured_steps_saved) << "batch 128 differs only in the batch";
  EXPECT_NEAR(*g64.measured_steps_saved, 1 - 3340.0 / 5690, 1e-9);
  EXPECT_FALSE(group_labelled(d, "batch.per_replica=512").measured_steps_saved) << "no group at 1024";
  for (const auto& run : d.runs) {  // every line of steps.jsonl read: 3 s_target / 10 records
    const auto* reached = run.steps_to_loss(1.0);
    ASSERT_NE(reached, nullptr) << run.dir;
    EXPECT_EQ(static_cast<int64_t>(run.steps.size()), 3 * reached->step / 10) << run.dir;
  }
  write_report(o);
  const std::string svg = read_file(o.out_dir / "batch_tradeoff.svg");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("fitted B_crit = ([0-9]+)"))) << svg;
  EXPECT_NEAR(std::stod(m[1].str()), 300, 5);
  EXPECT_TRUE(fs::exists(o.out_dir / "steps_train_loss.svg"));
  EXPECT_NE(read_file(o.out_dir / "report.html").find("Fewest steps to training loss 1: batch.per_replica=512"),
            std::string::npos);
}

// B_crit with its interval over seeds: 5 seeds whose steps follow S = 1000 (1 + 300 / B) within
// +-4% noise (less than the 9.6% by which samples grow from batch 32 to 64, so no seed is refused). The fit on the mean
// and each seed's own fit land near 300, the resampled interval holds 300; steps whose samples fall with the batch are
// refused, with the reason.
TEST(ReportAxes, CriticalBatchIsFittedPerSeedWithAnIntervalOverSeeds) {
  std::map<int64_t, std::map<double, double>> steps_by_seed;
  std::mt19937_64 draw(7);
  std::uniform_real_distribution<double> noise(0.96, 1.04);
  for (int64_t seed = 1; seed <= 5; ++seed)
    for (double b : {32.0, 64.0, 128.0, 256.0, 512.0, 1024.0})
      steps_by_seed[seed][b] = 1000 * (1 + 300 / b) * noise(draw);
  const CriticalBatchEstimate e = estimate_critical_batch(steps_by_seed, 0.45);
  ASSERT_TRUE(e.fit) << e.refusal;
  EXPECT_NEAR(e.fit->b_crit, 300, 0.25 * 300);
  EXPECT_EQ(e.seeds, 5);
  ASSERT_EQ(e.per_seed.size(), 5u);
  for (double b : e.per_seed) EXPECT_NEAR(b, 300, 0.5 * 300);
  EXPECT_LT(e.low, 300);
  EXPECT_GT(e.high, 300);
  EXPECT_LT(e.high - e.low, 300) << "five seeds pin it down to well within a factor of two";
  EXPECT_EQ(e.resamples, kCriticalBatchResamples);

  std::map<int64_t, std::map<double, double>> held_back = {{1, {{32, 3000}, {64, 700}, {128, 300}}},
                                                           {2, {{32, 2800}, {64, 720}, {128, 310}}}};
  const CriticalBatchEstimate refused = estimate_critical_batch(held_back, 0.45);
  EXPECT_FALSE(refused.fit);
  EXPECT_NE(refused.refusal.find("samples to target fall from"), std::string::npos) << refused.refusal;
  EXPECT_EQ(refused.seeds_refused, 2);
  const auto targets = critical_batch_targets(0.45);
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_NEAR(targets[1], 0.6, 1e-12);
  EXPECT_NEAR(targets[2], 0.75, 1e-12);
}

// A batch with one seed left (the other collapsed) has a point but no error bar; it used to get
// one from 0 to 100 points (a NaN half-width clamped into the metric's range).
TEST(ReportAxes, ABatchWithOneSeedHasNoErrorBar) {
  TempDir tmp;
  for (int per_replica : {64, 128})
    for (int seed = 1; seed <= 2; ++seed) {
      FakeRun r;
      r.seed = seed;
      r.per_replica = per_replica;
      r.run_id = fmt::format("b={},seed={}", per_replica, seed);
      r.test_acc = {0.5, per_replica == 128 && seed == 2 ? 0.10 : 0.80 + 0.01 * seed};
      write_run(tmp.path() / "runs", r);
    }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string svg = read_file(o.out_dir / "acc_vs_batch.svg");
  EXPECT_EQ(count_of(svg, "class=\"error-bar\""), 1u) << svg;
}

// Two numeric swept settings (lr x per-replica batch, 2 seeds each): a heatmap of the metric, and
// the accuracy-vs-batch chart draws one line per lr.
TEST(ReportAxes, TwoNumericSettingsGiveAHeatmapAndALinePerOtherSetting) {
  TempDir tmp;
  for (double lr : {0.01, 0.1})
    for (int per_replica : {32, 64})
      for (int seed = 1; seed <= 2; ++seed) {
        FakeRun r;
        r.seed = seed;
        r.per_replica = per_replica;
        r.run_id = fmt::format("lr={},b={},seed={}", lr, per_replica, seed);
        r.spec_patch = {{"optimizer", {{"lr", lr}}}};
        r.test_acc = {0.5, 0.6 + lr + per_replica / 1000.0 + 0.001 * seed};
        write_run(tmp.path() / "runs", r);
      }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string map = read_file(o.out_dir / "acc_heatmap.svg");
  EXPECT_EQ(count_of(map, "class=\"cell\""), 4u);
  EXPECT_NE(map.find(">76.55 \xC2\xB1"
                     "0.07 (n=2)</text>"),
            std::string::npos)
      << map;  // lr 0.1, batch 64
  const std::string acc = read_file(o.out_dir / "acc_vs_batch.svg");
  EXPECT_NE(acc.find(">optimizer.lr=0.01</text>"), std::string::npos) << acc;
  EXPECT_NE(acc.find(">optimizer.lr=0.1</text>"), std::string::npos);
}

// Replicas 1, 2 x per-replica batch 64, 128: global batch 128 is reached two ways, and the
// accuracy-vs-batch chart pools those into one point of one line (64, 128, 256).
TEST(ReportAxes, SplitsOfOneGlobalBatchArePooledIntoOnePoint) {
  TempDir tmp;
  for (int replicas : {1, 2})
    for (int per_replica : {64, 128})
      for (int seed = 1; seed <= 2; ++seed) {
        FakeRun r;
        r.seed = seed;
        r.replicas = replicas;
        r.per_replica = per_replica;
        r.run_id = fmt::format("r={},b={},seed={}", replicas, per_replica, seed);
        r.test_acc = {0.5, 0.8 + 0.001 * seed};
        write_run(tmp.path() / "runs", r);
      }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string acc = read_file(o.out_dir / "acc_vs_batch.svg");
  EXPECT_NE(acc.find(">all groups</text>"), std::string::npos) << acc;
  EXPECT_EQ(count_of(acc, "class=\"error-bar\""), 3u) << "one bar per global batch";
}
