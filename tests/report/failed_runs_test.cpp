// Runs that failed to learn (collapsed to chance, or diverged) named as failures in the report: the
// newcomer's sweep, where 3 of 4 runs of one configuration collapsed (issue 59).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/report/report.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::FakeRun;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_run;

namespace {

// A run that sat at chance (10 classes): epoch 1's loss exploded to `first_loss` when it is above
// 10 x ln 10, else it stayed at ln 10.
FakeRun at_chance(FakeRun r, double first_loss = 2.31) {
  r.test_acc = {0.1, 0.1015};
  r.train_loss = {first_loss, 2.3026};
  return r;
}

// replicas.count 1: `seeds` seeds that learnt (80% by epoch 2, 24 s); 2: its first `learnt` seeds
// learnt faster (80% by epoch 1, 12 s), the others sat at chance, collapsed, or with
// `explode_even` diverged on even seeds (epoch 1's loss 42.7).
void write_sweep(const TempDir& tmp, int seeds, int learnt, bool explode_even = false) {
  for (int seed = 1; seed <= seeds; ++seed) {
    FakeRun a;
    a.seed = seed;
    a.test_acc = {0.5, 0.8 + 0.001 * seed};
    write_run(tmp.path() / "runs", a);
    FakeRun b;
    b.replicas = 2;
    b.seed = seed;
    b.test_acc = {0.8, 0.82};
    write_run(tmp.path() / "runs", seed <= learnt ? b : at_chance(b, explode_even && seed % 2 == 0 ? 42.7 : 2.31));
  }
}

// The newcomer's sweep: 3 of replicas.count=2's 4 seeds collapsed.
void write_newcomers_sweep(const TempDir& tmp) { write_sweep(tmp, 4, 1); }

}  // namespace

TEST(ReportFailedRuns, ALossExplosionThatEndsAtChanceIsDivergedOneThatRecoveredIsOk) {
  TempDir tmp;
  FakeRun exploded = at_chance(FakeRun{}, 42.7);
  exploded.run_id = "exploded";
  write_run(tmp.path() / "runs", exploded);
  FakeRun recovered;
  recovered.run_id = "recovered";
  recovered.test_acc = {0.5, 0.8};
  recovered.train_loss = {42.7, 0.5};
  write_run(tmp.path() / "runs", recovered);
  FakeRun flat = at_chance(FakeRun{});
  flat.run_id = "flat";
  write_run(tmp.path() / "runs", flat);
  FakeRun recorded;  // the runner's own word (rundir/health.h)
  recorded.run_id = "recorded";
  recorded.status = "collapsed";
  recorded.test_acc = {0.1, 0.1};
  write_run(tmp.path() / "runs", recorded);
  for (const auto& r : analyze(options_for(tmp)).runs) {
    const auto expected = r.run_id == "exploded"    ? RunHealth::kDiverged
                          : r.run_id == "recovered" ? RunHealth::kOk
                                                    : RunHealth::kCollapsed;
    EXPECT_EQ(r.health(), expected) << r.run_id;
  }
}

// Was "-37.17 pts (—) | can't tell (too few runs)": one run of B is left to compare. Then "2
// worse" at p = 0.14, stronger than the test: "worse" only where Fisher's p is below 0.05.
TEST(ReportFailedRuns, AConfigurationWhoseRunsCollapsedMoreOftenIsWorseOnlyWhereFishersTestSaysSo) {
  TempDir tmp;
  write_newcomers_sweep(tmp);
  ReportOptions o = options_for(tmp);
  write_report(o);
  std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("2 failed more often: 3 of 4 runs collapsed (1: 0 of 4 runs collapsed; Fisher's exact p = "
                    "0.14: too few runs to call it worse)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("can't tell (too few runs)"), std::string::npos) << md;

  TempDir more;
  write_sweep(more, 6, 0);
  o = options_for(more);
  write_report(o);
  md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("2 worse: 6 of 6 runs collapsed (1: 0 of 6 runs collapsed; Fisher's exact p = 0.0022)"),
            std::string::npos)
      << md;
}

TEST(ReportFailedRuns, TheRecommendationNeverPicksAConfigurationWithCollapsedRuns) {
  TempDir tmp;
  write_newcomers_sweep(tmp);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  const ReportData d = analyze(o);
  const Recommendation r = recommend(d);
  ASSERT_NE(r.fastest, nullptr);
  EXPECT_EQ(r.fastest->label, "replicas.count=1") << "replicas.count=2's one good run was faster";
  ASSERT_EQ(r.left_out.size(), 1u);
  EXPECT_EQ(r.left_out[0]->label, "replicas.count=2");
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("Recommendation at 70.00% test accuracy: replicas.count=1 is fastest"), std::string::npos) << md;
  EXPECT_NE(md.find("Not recommended, though it reached the target: replicas.count=2 (3 of 4 runs collapsed)."),
            std::string::npos)
      << md;
}

// The time-to-target table leaves no configuration out: one whose every run failed has its row,
// saying so (was: no row at all, in the newcomer's sweep rerun on 2026-12-08).
TEST(ReportFailedRuns, TheTimeToTargetTableNamesAConfigurationWhoseRunsAllFailed) {
  TempDir tmp;
  write_sweep(tmp, 2, 0, /*explode_even=*/true);
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("| replicas.count=1 | 2/2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| replicas.count=2 | 0/0 (2 of 2 runs collapsed or diverged) |"), std::string::npos) << md;
}

// Was "no runs" for a cell that held two collapsed runs.
TEST(ReportFailedRuns, TheHeatmapShowsCollapsedCellsAsSuch) {
  TempDir tmp;
  for (double lr : {0.01, 0.1})
    for (int per_replica : {32, 64})
      for (int seed = 1; seed <= 2; ++seed) {
        FakeRun r;
        r.seed = seed;
        r.per_replica = per_replica;
        r.run_id = fmt::format("lr={},b={},seed={}", lr, per_replica, seed);
        r.spec_patch = {{"optimizer", {{"lr", lr}}}};
        r.test_acc = {0.5, 0.8};
        const bool collapsed = lr == 0.1 && (per_replica == 64 || seed == 2);
        write_run(tmp.path() / "runs", collapsed ? at_chance(r) : r);
      }
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string map = read_file(o.out_dir / "acc_heatmap.svg");
  EXPECT_EQ(map.find("no runs"), std::string::npos) << map;
  EXPECT_NE(map.find(">2 of 2 runs collapsed</text>"), std::string::npos) << map;     // lr 0.1, batch 64
  EXPECT_NE(map.find(">80.00 (n=1), 1 collapsed</text>"), std::string::npos) << map;  // lr 0.1, batch 32
}

// A run that learnt, but little (24% on 10 classes, above 1.5 x chance yet under 3.5 x): it stays in
// the statistics, and the groups table, runs table and groups.csv name it poor.
TEST(ReportFailedRuns, ARunUnderThePoorFloorIsCountedAndNamedPoor) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.test_acc = seed == 1 ? std::vector<double>{0.2, 0.24} : std::vector<double>{0.5, 0.8};
    write_run(tmp.path() / "runs", r);
  }
  const ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].n, 2) << "a poor run is a result, not a failure";
  EXPECT_EQ(d.groups[0].poor, 1);
  EXPECT_NEAR(d.groups[0].final_test_acc.mean, 0.52, 1e-12);
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("| 2 (1 poor) |"), std::string::npos) << md;
  EXPECT_NE(md.find("(poor: final test accuracy 24.00% under the floor 35.00% (3.5 \xC3\x97 chance))"),
            std::string::npos)
      << md;
  write_report(o);
  const std::string csv = read_file(o.out_dir / "groups.csv");
  EXPECT_NE(csv.find(",poor,"), std::string::npos) << csv;
}
