#include "ddplab/train/noise_scale.h"

#include <cmath>
#include <mutex>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/distributed/grad_reducer.h"
#include "distributed/ranks.h"

namespace ddplab::train {
namespace {

using distributed::Comm;
using distributed::GradReducer;
using distributed::GradReducerOptions;

at::Tensor scalar(double v) { return torch::tensor(v, torch::kFloat64); }

TEST(NoiseScale, StepEstimatesRecoverTraceAndGradientFromExpectedNorms) {
  // E|G_B|^2 = |G|^2 + tr(Sigma) / B: feed the expectations, get the truth back.
  const double g2 = 4, trace = 504;
  const auto est = noise_scale_step(g2 + trace / 64, g2 + trace / 128, 64, 128);
  EXPECT_NEAR(est.trace, trace, 1e-9);
  EXPECT_NEAR(est.grad_sq, g2, 1e-12);
  // The tensor path does the same arithmetic.
  GradNoiseScale gns(64, 128);
  gns.update(scalar(g2 + trace / 64), scalar(g2 + trace / 128));
  EXPECT_NEAR(*gns.trace_ema(), trace, 1e-9);
  EXPECT_NEAR(*gns.grad_sq_ema(), g2, 1e-12);
  EXPECT_NEAR(*gns.b_simple(), trace / g2, 1e-9);
}

TEST(NoiseScale, EmasAreBiasCorrectedAndDividedOnlyAtTheEnd) {
  NoiseScaleOptions options;
  options.decay = 0.5;
  GradNoiseScale gns(8, 32, options);
  // Step 1: S = 100, |G|^2 = 1; step 2: S = 300, |G|^2 = 9 (expected norms at B = 8 and 32).
  auto feed = [&](double s, double g) { gns.update(scalar(g + s / 8), scalar(g + s / 32)); };
  feed(100, 1);
  EXPECT_NEAR(*gns.trace_ema(), 100, 1e-9) << "one step: the corrected EMA is that step";
  feed(300, 9);
  // Raw EMA 0.5 * (0.5 * 100) + 0.5 * 300 = 175, corrected by 1 - 0.5^2 = 0.75.
  const double trace = (0.25 * 100 + 0.5 * 300) / 0.75, g2 = (0.25 * 1 + 0.5 * 9) / 0.75;
  EXPECT_NEAR(*gns.trace_ema(), trace, 1e-9);
  EXPECT_NEAR(*gns.grad_sq_ema(), g2, 1e-9);
  EXPECT_NEAR(*gns.b_simple(), trace / g2, 1e-9);
  EXPECT_GT(std::fabs(*gns.b_simple() - (100.0 / 1 + 300.0 / 9) / 2), 1.0) << "not a mean of per-step ratios";
  EXPECT_EQ(gns.steps(), 2);

  // The raw state restores the same values (checkpoints).
  GradNoiseScale again(8, 32, options);
  again.set_state(gns.raw_trace(), gns.raw_grad_sq(), gns.steps());
  EXPECT_DOUBLE_EQ(*again.trace_ema(), *gns.trace_ema());
  EXPECT_DOUBLE_EQ(*again.b_simple(), *gns.b_simple());
}

TEST(NoiseScale, OneReplicaMeasuresNothing) {
  GradNoiseScale gns(64, 64);
  EXPECT_FALSE(gns.measurable());
  gns.update(scalar(2), scalar(1));
  EXPECT_FALSE(gns.available());
  EXPECT_FALSE(gns.trace_ema().has_value());
  EXPECT_FALSE(gns.b_simple().has_value());
}

TEST(NoiseScale, NoBSimpleWhileTheGradientEstimateIsNotPositive) {
  GradNoiseScale gns(16, 32);
  // |G_big|^2 below half |G_small|^2 makes the |G|^2 estimate negative.
  gns.update(scalar(10), scalar(4));
  ASSERT_TRUE(gns.grad_sq_ema().has_value());
  EXPECT_LT(*gns.grad_sq_ema(), 0);
  EXPECT_FALSE(gns.b_simple().has_value());
}

// Linear regression with Gaussian inputs and noise, gradients taken at a fixed w = w* + delta
// (no step): x ~ N(0, I_d), y = w*.x + e, e ~ N(0, s^2), per-sample loss 0.5 (w.x - y)^2. The true
// gradient is delta and, by Isserlis, tr(Sigma) = d (|delta|^2 + s^2) + |delta|^2. Each rank draws
// its own samples; the real GradReducer all-reduces over Gloo and averages the local norms.
struct RegressionResult {
  double b_simple = 0, trace = 0, grad_sq = 0;
};

RegressionResult estimate_on_ranks(int ranks, int64_t per_rank_batch, bool mean, int64_t d, double delta_sq,
                                   double noise_sd, int steps) {
  RegressionResult result;
  std::mutex mutex;
  testing::run_ranks(ranks, [&](const std::shared_ptr<Comm>& comm) {
    auto gen = at::detail::createCPUGenerator(1000 + static_cast<uint64_t>(comm->rank));
    auto w_star = torch::linspace(-1, 1, d);
    auto w = (w_star + std::sqrt(delta_sq / static_cast<double>(d))).requires_grad_(true);
    std::vector<at::Tensor> params{w};
    GradReducerOptions options;
    options.reduce = mean ? config::Reduce::kMean : config::Reduce::kSum;
    GradReducer sync(params, comm, options);
    GradNoiseScale gns(per_rank_batch, per_rank_batch * ranks);
    for (int step = 0; step < steps; ++step) {
      auto x = torch::randn({per_rank_batch, d}, gen);
      auto y = x.matmul(w_star) + torch::randn({per_rank_batch}, gen) * noise_sd;
      sync.prepare_for_backward();
      auto loss = 0.5 * (x.matmul(w) - y).pow(2).mean();
      loss.backward();
      sync.finalize();
      ASSERT_TRUE(sync.local_norm_squared_mean().defined()) << "the step was reduced";
      gns.update(sync.local_norm_squared_mean(),
                 distributed::mean_grad_norm_squared(sync.grad_norm_squared(), options.reduce, ranks));
    }
    if (comm->rank == 0) {
      std::lock_guard<std::mutex> lock(mutex);
      result = {*gns.b_simple(), *gns.trace_ema(), *gns.grad_sq_ema()};
    }
  });
  return result;
}

void expect_isserlis(const RegressionResult& r, int64_t d, double delta_sq, double noise_var) {
  const double trace = static_cast<double>(d) * (delta_sq + noise_var) + delta_sq;
  const double truth = trace / delta_sq;
  EXPECT_NEAR(r.b_simple / truth, 1.0, 0.10) << "B_simple " << r.b_simple << ", tr(Sigma)/|G|^2 = " << truth;
  EXPECT_NEAR(r.trace / trace, 1.0, 0.15) << "S " << r.trace << ", tr(Sigma) = " << trace;
  EXPECT_NEAR(r.grad_sq / delta_sq, 1.0, 0.15) << "|G|^2 " << r.grad_sq << ", truth " << delta_sq;
  std::printf("[ noise scale ] B_simple %.2f vs tr(Sigma)/|G|^2 %.2f (%+.1f%%); S %.1f vs %.1f; |G|^2 %.3f vs %.3f\n",
              r.b_simple, truth, 100 * (r.b_simple / truth - 1), r.trace, trace, r.grad_sq, delta_sq);
}

TEST(NoiseScale, LinearRegressionOnTwoGlooRanksMatchesIsserlis) {
  // d = 100, |delta|^2 = 4, s^2 = 1: tr(Sigma) = 504, B_simple = 126 (per-rank batch 64, global 128).
  auto r = estimate_on_ranks(2, 64, /*mean=*/true, 100, 4.0, 1.0, 500);
  expect_isserlis(r, 100, 4.0, 1.0);
}

TEST(NoiseScale, LinearRegressionOnFourGlooRanksWithSumReductionMatchesIsserlis) {
  auto r = estimate_on_ranks(4, 32, /*mean=*/false, 100, 4.0, 1.0, 500);
  expect_isserlis(r, 100, 4.0, 1.0);
}

}  // namespace
}  // namespace ddplab::train
