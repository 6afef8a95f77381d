// report/decide.cpp: what the report decides: who reached the target first, the recommendation,
// the noise scale verdict.

#include <gtest/gtest.h>

#include "ddplab/report/analysis.h"
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

// A run that early stopping ended says so in the runs table, and the summary names every such run:
// where it stopped and on what.
TEST(Report, EarlyStoppedRunsAreNamedWithWhereAndOnWhatTheyStopped) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    if (seed == 2)
      r.manifest_patch = {
          {"early_stop", {{"epochs_done", 3}, {"best_epoch", 1}, {"metric", "val_loss"}, {"best", 0.41}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportOptions o = options_for(tmp);
  const ReportData d = analyze(o);
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("Early stopping (early_stop.patience) ended 1 of 2 finished runs before their last epoch: "
                    "replicas.count=1,schedule.scale_rule=none,seed=2 (stopped early after epoch 3 of 10: val_loss "
                    "best at epoch 1)."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| done, stopped early after epoch 3 of 10: val_loss best at epoch 1 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("seed=1 (stopped early"), std::string::npos);
}
