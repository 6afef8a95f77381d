// The planner's fits on synthetic measurements made from known parameters: each is recovered
// within the tolerance stated in the test.
#include "ddplab/plan/fit.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "ddplab/report/report.h"
#include "test_util.h"

namespace ddplab::plan {
namespace {

// Measurements from a known step-time model, with multiplicative noise of `noise` (relative sd).
std::vector<StepTiming> synthetic_timings(const StepTimeModel& truth, const std::vector<int>& replicas,
                                          const std::vector<double>& batches, double noise = 0) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> jitter(0, noise);
  std::vector<StepTiming> out;
  for (int n : replicas)
    for (double b : batches) {
      StepTiming t;
      t.replicas = n;
      t.per_replica_batch = b;
      const double f = noise > 0 ? std::exp(jitter(rng)) : 1.0;
      t.step_s = truth.step_s(n, b) * f;
      t.comm_wait_s = truth.exposed_comm_s(n, b) * f;
      out.push_back(t);
    }
  return out;
}

// T_comp(b) = alpha + beta b: the line through two of its points.
ComputeCurve line(double alpha, double beta) { return {{{1, alpha + beta}, {2, alpha + 2 * beta}}}; }

StepTimeModel known_model() {
  StepTimeModel m;
  m.compute[1] = line(0.002, 0.0004);  // 2 ms + 0.4 ms per sample
  m.compute[2] = line(0.002, 0.0004);
  m.compute[4] = line(0.002, 0.0004);
  m.payload_bytes = 4.0 * 1.2e6;  // 1.2 M float32 parameters
  m.buckets = 2;
  m.seconds_per_byte = 1 / 1.0e9;  // 1 GB/s
  m.latency_s = 0.003;
  m.overlap = 2.5;
  return m;
}

TEST(PlanFit, ComputeLineIsRecoveredExactly) {
  const auto fit = fit_compute({32, 64, 128}, {0.01 + 0.001 * 32, 0.01 + 0.001 * 64, 0.01 + 0.001 * 128});
  ASSERT_TRUE(fit.has_value());
  for (double b : {8.0, 32.0, 48.0, 100.0, 512.0}) EXPECT_NEAR(fit->at(b), 0.01 + 0.001 * b, 1e-12) << b;
  EXPECT_FALSE(fit_compute({64, 64}, {0.1, 0.2}).has_value());
}

// A cost per sample that falls and rises again (the 2-core CPU of docs/planner.md, 1 replica:
// 26, 54, 106 and 248 ms at 32, 96, 192 and 384): the curve passes through every timed batch
// (the median of repeated timings), where one line through the ends misses the middle by 20%.
TEST(PlanFit, ComputeCurvePassesThroughEveryTimedBatch) {
  const auto fit = fit_compute({32, 96, 96, 96, 192, 384}, {0.026, 0.050, 0.054, 0.060, 0.106, 0.248});
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->at(96), 0.054, 1e-12);
  EXPECT_NEAR(fit->at(192), 0.106, 1e-12);
  EXPECT_NEAR(fit->at(144), (0.054 + 0.106) / 2, 1e-12) << "linear between neighbours";
  EXPECT_NEAR(fit->at(16), 0.026 - 16 * (0.054 - 0.026) / 64, 1e-12) << "the first segment, extended";
  EXPECT_NEAR(fit->at(768), 0.248 + 384 * (0.248 - 0.106) / 192, 1e-12) << "the last segment, extended";
  const auto ends = fit_compute({32, 384}, {0.026, 0.248});
  EXPECT_GT(ends->at(192) / 0.106, 1.15) << "the line through the ends alone";
}

// Noise-free: alpha, beta, bandwidth and latency within 1%, the overlap g within the grid's 0.01.
TEST(PlanFit, StepTimeModelRecoversKnownParameters) {
  const StepTimeModel truth = known_model();
  const auto timings = synthetic_timings(truth, {1, 2, 4}, {16, 32, 64, 128});
  const StepTimeModel m = fit_step_time(timings, truth.payload_bytes, truth.buckets);
  for (double b : {8.0, 48.0, 256.0})
    EXPECT_NEAR(m.compute_at(2).at(b), truth.compute_at(2).at(b), 0.01 * truth.compute_at(2).at(b)) << b;
  EXPECT_NEAR(m.overlap, 2.5, 0.011);
  EXPECT_TRUE(m.latency_fitted);
  EXPECT_NEAR(m.seconds_per_byte, 1e-9, 0.01e-9);
  EXPECT_NEAR(m.latency_s, 0.003, 0.01 * 0.003);
  EXPECT_LT(m.log_rms, 1e-3);
}

// 2% noise on every step time: predictions at replica counts and batches inside the calibration
// within 5%, and g within 1 of the truth.
TEST(PlanFit, StepTimeModelWithNoisePredictsWithinFivePercent) {
  const StepTimeModel truth = known_model();
  const auto timings = synthetic_timings(truth, {1, 2, 4}, {16, 32, 64, 128}, 0.02);
  const StepTimeModel m = fit_step_time(timings, truth.payload_bytes, truth.buckets);
  for (int n : {1, 2, 4})
    for (double b : {24.0, 48.0, 96.0}) EXPECT_NEAR(m.step_s(n, b) / truth.step_s(n, b), 1.0, 0.05) << n << " x " << b;
  EXPECT_NEAR(m.overlap, 2.5, 1.0);
}

// One multi-replica count: bandwidth and latency cannot be told apart, so all communication is put
// on bandwidth, and the step times at that count are still met.
TEST(PlanFit, OneReplicaCountPutsCommunicationOnBandwidth) {
  const StepTimeModel truth = known_model();
  const auto timings = synthetic_timings(truth, {1, 2}, {16, 64});
  const StepTimeModel m = fit_step_time(timings, truth.payload_bytes, truth.buckets);
  EXPECT_FALSE(m.latency_fitted);
  EXPECT_EQ(m.latency_s, 0);
  EXPECT_NEAR(m.comm_s(2), truth.comm_s(2), 0.01 * truth.comm_s(2));
  for (double b : {16.0, 64.0}) EXPECT_NEAR(m.step_s(2, b) / truth.step_s(2, b), 1.0, 0.01);
}

// A replica count timed at one per-replica batch takes the nearest fitted line, scaled to its
// measured compute time: here twice as slow per replica (2 replicas sharing the cores).
TEST(PlanFit, ACountTimedAtOneBatchScalesTheNearestLine) {
  StepTimeModel truth = known_model();
  truth.compute[2] = line(0.004, 0.0008);
  auto timings = synthetic_timings(truth, {1}, {16, 64});
  const auto two = synthetic_timings(truth, {2}, {32});
  timings.insert(timings.end(), two.begin(), two.end());
  const StepTimeModel m = fit_step_time(timings, truth.payload_bytes, truth.buckets);
  ASSERT_EQ(m.compute_scaled.count(2), 1u);
  for (double b : {16.0, 32.0, 64.0}) EXPECT_NEAR(m.compute_at(2).at(b), 0.004 + 0.0008 * b, 1e-9) << b;
  EXPECT_NEAR(m.step_s(2, 32) / truth.step_s(2, 32), 1.0, 0.01);
}

TEST(PlanFit, TooFewBatchesNamesWhatIsMissing) {
  const std::string message = testing::error_of([] { fit_step_time({{1, 64, 0.05, 0}, {2, 32, 0.04, 0.01}}, 1e6, 1); });
  EXPECT_NE(message.find("2 or more per-replica batches"), std::string::npos) << message;
  EXPECT_NE(message.find("1 x 64"), std::string::npos) << message;
}

// The predicted exposed communication is what comm_wait_s measures: on the synthetic data it is
// the synthetic comm_wait within 1% (of the step time).
TEST(PlanFit, ExposedCommunicationMatchesCommWait) {
  const StepTimeModel truth = known_model();
  const auto timings = synthetic_timings(truth, {1, 2, 4}, {16, 32, 64, 128});
  const StepTimeModel m = fit_step_time(timings, truth.payload_bytes, truth.buckets);
  for (const auto& t : timings)
    EXPECT_NEAR(m.exposed_comm_s(t.replicas, t.per_replica_batch), t.comm_wait_s, 0.01 * t.step_s);
}

// The probe's points from a known bandwidth and latency at 2 and 4 replicas: both within 1%
// noise-free; with 5% noise on every time, within 10%.
std::vector<ProbePoint> probe_points(double seconds_per_byte, double latency_s, double noise) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> jitter(0, noise);
  std::vector<ProbePoint> points;
  for (int n : {2, 4})
    for (double bytes = 4096; bytes <= 16 * 1024 * 1024; bytes *= 4)
      points.push_back(
          {n, bytes,
           (ring_factor(n) * bytes * seconds_per_byte + latency_s) * (noise > 0 ? std::exp(jitter(rng)) : 1)});
  return points;
}

TEST(PlanFit, AllReduceProbeRecoversBandwidthAndLatency) {
  const auto exact = fit_allreduce(probe_points(1 / 1.0e9, 50e-6, 0));
  ASSERT_TRUE(exact.has_value());
  EXPECT_NEAR(exact->seconds_per_byte, 1e-9, 0.01e-9);
  EXPECT_NEAR(exact->latency_s, 50e-6, 0.01 * 50e-6);
  const auto noisy = fit_allreduce(probe_points(1 / 1.0e9, 50e-6, 0.05));
  ASSERT_TRUE(noisy.has_value());
  EXPECT_NEAR(noisy->seconds_per_byte, 1e-9, 0.1e-9);
  EXPECT_NEAR(noisy->latency_s, 50e-6, 0.1 * 50e-6);
  // One size, or one replica: nothing to fit.
  EXPECT_FALSE(fit_allreduce({{2, 4096, 1e-4}, {2, 4096, 1.1e-4}}).has_value());
  EXPECT_FALSE(fit_allreduce({{1, 4096, 1e-4}, {1, 65536, 2e-4}}).has_value());
}

// With the probe's constants the step-time fit keeps them and fits only the overlap g: here g is
// recovered within the grid's step, and so are the step times.
TEST(PlanFit, MeasuredCommunicationFitsOnlyTheOverlap) {
  const StepTimeModel truth = known_model();
  const auto timings = synthetic_timings(truth, {1, 2}, {16, 64});
  const StepTimeModel m =
      fit_step_time(timings, truth.payload_bytes, truth.buckets, CommFit{truth.seconds_per_byte, truth.latency_s});
  EXPECT_TRUE(m.comm_measured);
  EXPECT_EQ(m.seconds_per_byte, truth.seconds_per_byte);
  EXPECT_EQ(m.latency_s, truth.latency_s);
  EXPECT_NEAR(m.overlap, 2.5, 0.011);
  for (double b : {16.0, 64.0}) EXPECT_NEAR(m.step_s(2, b) / truth.step_s(2, b), 1.0, 0.01);
  // Without a multi-replica timing there is no payload to carry: the probe is not used.
  EXPECT_FALSE(fit_step_time(synthetic_timings(truth, {1}, {16, 64}), 0, 1, CommFit{1e-9, 1e-4}).comm_measured);
}

TEST(PlanFit, BucketsFollowDdpsFirstBucket) {
  EXPECT_EQ(bucket_count(0.5 * 1024 * 1024, 25), 1);
  EXPECT_EQ(bucket_count(1.5 * 1024 * 1024, 25), 2);
  EXPECT_EQ(bucket_count(60.0 * 1024 * 1024, 25), 4);  // 1 + ceil(59 / 25)
}

// S(B) = S_min (1 + B_crit / B) through report's fit (the planner reuses it): exact on exact data.
TEST(PlanFit, StepsModelRecoversSminAndBcrit) {
  const double s_min = 400, b_crit = 300;
  std::vector<double> batches = {64, 128, 256, 512}, steps;
  for (double b : batches) steps.push_back(s_min * (1 + b_crit / b));
  const auto fit = report::fit_batch_tradeoff(batches, steps);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->s_min, s_min, 1e-6 * s_min);
  EXPECT_NEAR(fit->b_crit, b_crit, 1e-6 * b_crit);
}

// With a constant noise scale phi = B_crit the noise-scale estimate is McCandlish's curve through
// the reference point, exactly; with phi growing over training it sits between the curves of its
// smallest and largest phi.
TEST(PlanFit, NoiseScaleEstimateMatchesMcCandlishAtConstantPhi) {
  const double s_min = 400, b_crit = 300, b0 = 64;
  const double s0 = s_min * (1 + b_crit / b0);
  const std::vector<ProgressSpan> constant = {{s0 / 2, b_crit}, {s0 / 2, b_crit}};
  for (double b : {32.0, 128.0, 1024.0})
    EXPECT_NEAR(noise_scale_steps(constant, b0, b), s_min * (1 + b_crit / b), 1e-9 * s0);
  const std::vector<ProgressSpan> growing = {{s0 / 2, 100}, {s0 / 2, 500}};
  const double at = noise_scale_steps(growing, b0, 256);
  const double small = noise_scale_steps({{s0, 100}}, b0, 256), large = noise_scale_steps({{s0, 500}}, b0, 256);
  EXPECT_GT(at, std::min(small, large));
  EXPECT_LT(at, std::max(small, large));
}

TEST(PlanFit, TimeToTargetAddsEvaluationAndStartUp) {
  EXPECT_DOUBLE_EQ(time_to_target(1000, 0.05, 3, 2.0, 4.0), 50 + 6 + 4);
}

// Evaluations on the way to the target, counted in whole steps: a loss target reached at the last
// step of epoch 1 (step 96 of 96) is read before that epoch's evaluation, an accuracy target at it;
// a predicted 96 that a fit printed as 96.00000000001 or 95.99999999999 counts as 96.
TEST(PlanFit, EvaluationsToATargetCountWholeSteps) {
  for (double at_boundary : {96.0, 96.00000000001, 95.99999999999}) {
    EXPECT_EQ(evaluations_to_target(at_boundary, 96, true), 0) << at_boundary;
    EXPECT_EQ(evaluations_to_target(at_boundary, 96, false), 1) << at_boundary;
  }
  EXPECT_EQ(evaluations_to_target(96.5, 96, true), 1) << "reached in step 97, after epoch 1's evaluation";
  EXPECT_EQ(evaluations_to_target(96.5, 96, false), 2) << "read at the end of epoch 2";
  EXPECT_EQ(evaluations_to_target(1, 96, true), 0);
  EXPECT_EQ(evaluations_to_target(1, 96, false), 1);
  EXPECT_EQ(evaluations_to_target(288, 96, true), 2);
  EXPECT_EQ(evaluations_to_target(288, 96, false), 3);
}

TEST(PlanFit, SpearmanOfRanks) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {1, 3, 2, 5, 4}), 0.8, 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));
}

}  // namespace
}  // namespace ddplab::plan
