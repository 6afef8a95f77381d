#include "ddplab/train/lr_schedule.h"

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ddplab::train {
namespace {

config::OptimizerSpec sgd(double lr) {
  config::OptimizerSpec o;
  o.lr = lr;
  return o;
}

config::ScheduleSpec constant(const std::string& rule = "none") {
  config::ScheduleSpec s;
  s.scale_rule = config::parse_setting<config::ScaleRule>(rule, "/schedule/scale_rule");
  s.base_batch = 64;
  s.warmup_epochs = 0;
  s.decay = config::Decay::kConstant;
  return s;
}

TEST(LrSchedule, ScaleRuleNoneKeepsTheBaseLr) {
  LrSchedule lr(sgd(0.1), constant("none"), 256, 10);
  EXPECT_DOUBLE_EQ(lr.scale(), 1.0);
  EXPECT_DOUBLE_EQ(lr(0.0), 0.1);
  EXPECT_DOUBLE_EQ(lr(7.3), 0.1);
}

TEST(LrSchedule, ScaleRuleLinearMultipliesByGlobalOverBase) {
  LrSchedule lr(sgd(0.1), constant("linear"), 256, 10);  // k = 256 / 64 = 4
  EXPECT_DOUBLE_EQ(lr.scale(), 4.0);
  EXPECT_DOUBLE_EQ(lr(3.0), 0.4);
}

TEST(LrSchedule, ScaleRuleSqrtMultipliesBySqrtOfK) {
  LrSchedule lr(sgd(0.1), constant("sqrt"), 256, 10);  // sqrt(4) = 2
  EXPECT_DOUBLE_EQ(lr.scale(), 2.0);
  EXPECT_DOUBLE_EQ(lr(3.0), 0.2);
}

TEST(LrSchedule, ScaleRuleLinearBelowBaseBatchShrinks) {
  LrSchedule lr(sgd(0.1), constant("linear"), 32, 10);  // k = 0.5
  EXPECT_DOUBLE_EQ(lr.scale(), 0.5);
  EXPECT_DOUBLE_EQ(lr(0.0), 0.05);
}

TEST(LrSchedule, WarmupStartsAtStartFactorAndReachesOneAtWarmupEnd) {
  auto s = constant();
  s.warmup_epochs = 2.0;
  s.warmup_start_factor = 0.1;
  LrSchedule lr(sgd(0.1), s, 64, 10);
  EXPECT_DOUBLE_EQ(lr(0.0), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(lr(1.0), 0.1 * 0.55);   // 0.1 + 0.9 * 1/2
  EXPECT_DOUBLE_EQ(lr(0.5), 0.1 * 0.325);  // 0.1 + 0.9 * 1/4
  EXPECT_DOUBLE_EQ(lr(2.0), 0.1);
  EXPECT_DOUBLE_EQ(lr(5.0), 0.1);
}

TEST(LrSchedule, StepDecayMultipliesByGammaEveryStepEpochs) {
  auto s = constant();
  s.decay = config::Decay::kStep;
  s.step_epochs = 30;
  s.gamma = 0.1;
  LrSchedule lr(sgd(1.0), s, 64, 100);
  EXPECT_DOUBLE_EQ(lr(0.0), 1.0);
  EXPECT_DOUBLE_EQ(lr(29.99), 1.0);
  EXPECT_DOUBLE_EQ(lr(30.0), 0.1);
  EXPECT_DOUBLE_EQ(lr(59.5), 0.1);
  EXPECT_NEAR(lr(60.0), 0.01, 1e-15);
}

TEST(LrSchedule, MultistepDecayCountsMilestonesPassed) {
  auto s = constant();
  s.decay = config::Decay::kMultistep;
  s.milestones = {2.0, 5.0};
  s.gamma = 0.5;
  LrSchedule lr(sgd(1.0), s, 64, 10);
  EXPECT_DOUBLE_EQ(lr(1.99), 1.0);
  EXPECT_DOUBLE_EQ(lr(2.0), 0.5);
  EXPECT_DOUBLE_EQ(lr(4.9), 0.5);
  EXPECT_DOUBLE_EQ(lr(5.0), 0.25);
  EXPECT_DOUBLE_EQ(lr(9.0), 0.25);
}

TEST(LrSchedule, ExponentialDecayIsGammaToTheFractionalEpoch) {
  auto s = constant();
  s.decay = config::Decay::kExponential;
  s.gamma = 0.5;
  LrSchedule lr(sgd(1.0), s, 64, 10);
  EXPECT_DOUBLE_EQ(lr(0.0), 1.0);
  EXPECT_DOUBLE_EQ(lr(2.0), 0.25);
  EXPECT_NEAR(lr(1.5), 0.35355339059327373, 1e-12);  // 0.5^1.5 = 1/(2*sqrt 2)
}

TEST(LrSchedule, CosineGoesFromOneToMinFactor) {
  auto s = constant();
  s.decay = config::Decay::kCosine;
  s.min_factor = 0.1;
  LrSchedule lr(sgd(1.0), s, 64, 10);
  EXPECT_DOUBLE_EQ(lr(0.0), 1.0);
  EXPECT_NEAR(lr(5.0), 0.55, 1e-12);  // 0.1 + 0.9 * (1 + cos(pi/2)) / 2
  EXPECT_NEAR(lr(10.0), 0.1, 1e-12);  // 0.1 + 0.9 * (1 + cos(pi)) / 2
  EXPECT_NEAR(lr(2.5), 0.1 + 0.9 * (1 + 0.70710678118654752) / 2, 1e-12);
}

TEST(LrSchedule, CosineWithZeroMinFactorEndsAtZero) {
  auto s = constant();
  s.decay = config::Decay::kCosine;
  s.min_factor = 0.0;
  LrSchedule lr(sgd(0.2), s, 64, 4);
  EXPECT_NEAR(lr(4.0), 0.0, 1e-15);
  EXPECT_NEAR(lr(2.0), 0.1, 1e-12);
}

TEST(LrSchedule, WarmupAndDecayMultiply) {
  auto s = constant("linear");
  s.warmup_epochs = 1.0;
  s.warmup_start_factor = 0.1;
  s.decay = config::Decay::kCosine;
  s.min_factor = 0.0;
  LrSchedule lr(sgd(0.1), s, 128, 10);  // scale 2
  // e = 0.5: warmup 0.1 + 0.9 * 0.5 = 0.55; cosine (1 + cos(pi * 0.05)) / 2 = 0.99384417029756889
  EXPECT_NEAR(lr(0.5), 0.1 * 2 * 0.55 * 0.99384417029756889, 1e-12);
  // e = 5: warmup over, cosine 0.5
  EXPECT_NEAR(lr(5.0), 0.1 * 2 * 0.5, 1e-12);
}

TEST(LrSchedule, StepDecayDuringWarmupAlsoApplies) {
  auto s = constant();
  s.warmup_epochs = 4.0;
  s.warmup_start_factor = 0.0;
  s.decay = config::Decay::kStep;
  s.step_epochs = 2.0;
  s.gamma = 0.1;
  LrSchedule lr(sgd(1.0), s, 64, 10);
  EXPECT_DOUBLE_EQ(lr(1.0), 0.25);          // warmup 1/4, decay 1
  EXPECT_NEAR(lr(3.0), 0.75 * 0.1, 1e-15);  // warmup 3/4, decay 0.1
}

TEST(LrSchedule, DependsOnlyOnFractionalEpochNotOnBatchWhenUnscaled) {
  auto s = constant("none");
  s.warmup_epochs = 2.0;
  s.decay = config::Decay::kCosine;
  s.min_factor = 0.05;
  LrSchedule small(sgd(0.05), s, 64, 8);
  LrSchedule big(sgd(0.05), s, 512, 8);
  for (double e : {0.0, 0.25, 1.5, 2.0, 3.75, 7.9}) EXPECT_DOUBLE_EQ(small(e), big(e)) << "epoch " << e;
  // And with linear scaling they differ by exactly k = 8 at every epoch.
  s.scale_rule = config::ScaleRule::kLinear;
  LrSchedule small_l(sgd(0.05), s, 64, 8);
  LrSchedule big_l(sgd(0.05), s, 512, 8);
  EXPECT_NEAR(big_l(1.5), 8.0 * small_l(1.5), 1e-15);
  EXPECT_DOUBLE_EQ(small_l(1.5), small(1.5));
}

// The peak as the run takes it: over its steps (e = i + k / steps), not its end-of-epoch samples.
// Warmup over 0.5 epochs then cosine over 3: the lr rises to e = 0.5 and falls after, so with 4
// steps per epoch the highest step is e = 0.5 (0.4 x 4 x decay(0.5)); the epoch records, at e = 0.75,
// 1.75 and 2.75, never see it.
TEST(LrSchedule, ThePeakIsTheHighestStepsLrAndTheManifestSaysSo) {
  config::ScheduleSpec s = constant("linear");
  s.warmup_epochs = 0.5;
  s.warmup_start_factor = 0.1;
  s.decay = config::Decay::kCosine;
  LrSchedule lr(sgd(0.1), s, 256, 3);  // scaled: 0.4
  const auto [peak, at] = lr.peak(4);
  EXPECT_DOUBLE_EQ(at, 0.5);
  EXPECT_DOUBLE_EQ(peak, 0.4 * (1 + std::cos(M_PI * 0.5 / 3)) / 2);
  EXPECT_GT(peak, lr(0.75));
  const nlohmann::json m = lr.manifest_entry(4);
  EXPECT_DOUBLE_EQ(m["spec"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(m["scale"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(m["scaled"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(m["peak"].get<double>(), peak);
  EXPECT_DOUBLE_EQ(m["peak_epoch"].get<double>(), 0.5);
}

}  // namespace
}  // namespace ddplab::train
