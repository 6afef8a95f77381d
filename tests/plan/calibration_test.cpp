// plan/calibration.h: a run measured against an accuracy target reads it where the report does
// (rundir::RunData::reaching): at evaluation points when the run has them.
#include "ddplab/plan/calibration.h"

#include <cmath>

#include <gtest/gtest.h>

#include "ddplab/rundir/run_reader.h"
#include "report/fake_run.h"
#include "test_util.h"

namespace ddplab::plan {
namespace {

TEST(Calibration, AnAccuracyTargetIsMeasuredAtEvaluationPointsWhenTheRunHasThem) {
  testing::TempDir tmp;
  testing::FakeRun r;
  r.test_acc = {0.5, 0.79, 0.81};  // at epoch ends: epoch 3, step 300, 36 s
  r.steps = testing::eval_points_every_20_steps(
      {0.3, 0.4, 0.45, 0.5, 0.52, 0.6, 0.7, 0.76, 0.78, 0.79, 0.805, 0.81, 0.82, 0.82, 0.83});
  r.manifest_patch = {{"step_eval", {{"every_steps", 20}, {"set", "test"}, {"samples", 1000}}}};
  const auto dir = testing::write_run(tmp.path() / "runs", r);
  std::vector<std::string> warnings;
  Target target;
  target.acc = 0.8;
  const MeasuredRun m = measure_run(rundir::read_run(dir, warnings), target);
  ASSERT_TRUE(m.steps_to_target.has_value()) << m.left_out;
  EXPECT_EQ(*m.steps_to_target, 220.0) << "the point in the third epoch, not its end";
  EXPECT_NEAR(*m.time_to_target_s, 0.12 * 220, 1e-9) << "no manifest end: no start-up added";
}

// Start-up is the manifest's train_start - start, to the millisecond; a run written before
// train_start existed falls back to end - start - the last wall_s; a run that restarted has none.
TEST(Calibration, StartUpIsFromTheRunsStartToItsTrainingClocksStart) {
  testing::TempDir tmp;
  testing::FakeRun r;  // manifest start 2026-01-01T00:00:00Z; the last epoch's wall_s 36 s
  r.test_acc = {0.5, 0.79, 0.81};
  const auto measured = [&](const std::string& name, const nlohmann::json& patch) {
    r.name = name;
    r.manifest_patch = patch;
    std::vector<std::string> warnings;
    Target target;
    target.acc = 0.8;
    return measure_run(rundir::read_run(testing::write_run(tmp.path() / "runs", r), warnings), target);
  };
  const MeasuredRun timed =
      measured("timed", {{"train_start", "2026-01-01T00:00:01.250Z"}, {"end", "2026-01-01T00:00:40.000Z"}});
  EXPECT_DOUBLE_EQ(timed.startup_s, 1.25);
  ASSERT_TRUE(timed.time_to_target_s.has_value()) << timed.left_out;
  EXPECT_DOUBLE_EQ(*timed.time_to_target_s, 36 + 1.25) << "epoch 3's wall_s plus the start-up";
  EXPECT_DOUBLE_EQ(measured("older", {{"end", "2026-01-01T00:00:40Z"}}).startup_s, 40 - 36);
  EXPECT_TRUE(std::isnan(measured("restarted", {{"train_start", "2026-01-01T00:00:01.250Z"},
                                                {"end", "2026-01-01T00:00:40Z"},
                                                {"restarts", {{{"time", "2026-01-01T00:00:20Z"}}}}})
                             .startup_s));
}

}  // namespace
}  // namespace ddplab::plan
