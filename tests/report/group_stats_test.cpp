// report/group_stats.cpp: each group's statistics: failed runs, time to target, throughput and
// host load, the noise scale guard.
#include <cmath>

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
using ddplab::testing::write_file;
using ddplab::testing::write_run;

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
  EXPECT_NE(
      md.find("1.25 (vs replicas.count=1; above 1: the runs saw different machine loads, not a speed-up (host load "
              "not measured here, load not measured at the baseline))"),
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
  ASSERT_EQ(d.warnings.size(), 2u) << ::testing::PrintToString(d.warnings);
  EXPECT_EQ(d.warnings[0],
            "1 of 3 finished runs trained on a busy host (CPU wait or steal above 10%: other jobs on its cores, or "
            "more threads than cores): replicas.count=1,schedule.scale_rule=none,seed=2 (CPU wait 62%); their "
            "images/s and times to target include the wait, so speed comparisons with them are not of the settings "
            "alone");
  EXPECT_EQ(d.warnings[1],
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

// A host busy throughout: no run stands out from its group, yet every run is named; and 2 replicas
// at more than twice the images/s of 1 (the same per-replica batch) are flagged with both loads.
TEST(Report, EveryRunOnABusyHostIsNamedAndASuperlinearSpeedUpIsFlagged) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.host_cpu_wait_pct = replicas == 1 ? 40 : 12;
      r.images_per_s = replicas == 1 ? 100 : 220;
      write_run(tmp.path() / "runs", r);
    }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_EQ(d.warnings[0].rfind("4 of 4 finished runs trained on a busy host", 0), 0u) << d.warnings[0];
  for (const auto& r : d.runs) EXPECT_NE(d.warnings[0].find(r.run_id), std::string::npos) << r.run_id;
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("2.20\xC3\x97; 2 replicas gave more than 2\xC3\x97 the images/s of 1, beyond what data parallelism "
                    "can give: the host's load, not a speed-up (A: CPU wait 40%; B: CPU wait 12%)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("above 1: the runs saw different machine loads, not a speed-up (host CPU wait 12% here, CPU wait "
                    "40% at the baseline)"),
            std::string::npos)
      << md;
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
  EXPECT_NE(md.find("| replicas.count=2 | 2 of 4 runs (1 collapsed, 1 diverged) (1 poor) |"), std::string::npos) << md;
  EXPECT_NE(
      md.find(
          "2 failed more often: 2 of 4 runs collapsed or diverged (1: 0 of 3 runs collapsed; Fisher's exact p = 0.43: "
          "too few runs to call it worse)"),
      std::string::npos)
      << md;
  const std::string groups = read_file(o.out_dir / "groups.csv");
  EXPECT_EQ(csv_cell(groups, 1, "group"), "replicas.count=2") << groups;
  EXPECT_EQ(csv_cell(groups, 1, "collapsed"), "1") << groups;
  EXPECT_EQ(csv_cell(groups, 1, "diverged"), "1") << groups;
  const std::string comparisons = read_file(o.out_dir / "comparisons.csv");
  EXPECT_EQ(csv_cell(comparisons, 0, "bad_runs_p"), "0.4285714286") << comparisons;
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
