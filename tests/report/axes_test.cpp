// report/axes.cpp: the charts against the swept settings, the batch tradeoff fit and the
// critical batch.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/report/report.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::count_of;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_run;

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
  EXPECT_EQ(e.interval_refusal, "");
  // Three of the seeds: the fit and each seed's stand, the resampled "interval" is not given.
  auto three = steps_by_seed;
  three.erase(4);
  three.erase(5);
  const CriticalBatchEstimate few = estimate_critical_batch(three, 0.45);
  ASSERT_TRUE(few.fit);
  EXPECT_TRUE(std::isnan(few.low) && std::isnan(few.high));
  EXPECT_EQ(few.interval_refusal, "3 seeds: too few to resample (5 needed)");

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
