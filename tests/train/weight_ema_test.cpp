#include "ddplab/train/weight_ema.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::train {
namespace {

TEST(WeightEma, DecayWarmsUpAsTensorFlowsNumUpdates) {
  WeightEma ema({torch::zeros({2})}, 0.99);
  EXPECT_DOUBLE_EQ(ema.decay_at(0), 0.1);        // (1 + 0) / (10 + 0)
  EXPECT_DOUBLE_EQ(ema.decay_at(90), 0.91);      // 91 / 100
  EXPECT_DOUBLE_EQ(ema.decay_at(100000), 0.99);  // capped at the decay
}

TEST(WeightEma, AveragesTheParametersAfterEachStep) {
  auto p = torch::tensor({1.0, -2.0}, torch::kFloat64);
  auto q = torch::tensor({3.0}, torch::kFloat64);
  WeightEma ema({p, q}, 0.5);
  // Hand-computed: start at the parameters, then ema = d*ema + (1-d)*param with d = min(0.5, ...).
  std::vector<double> expected_p{1.0, -2.0};
  double expected_q = 3.0;
  for (int64_t step = 0; step < 20; ++step) {
    p.add_(0.25);
    q.mul_(0.9);
    const double d = std::min(0.5, (1.0 + step) / (10.0 + step));
    for (int i = 0; i < 2; ++i) expected_p[i] = d * expected_p[i] + (1 - d) * p[i].item<double>();
    expected_q = d * expected_q + (1 - d) * q[0].item<double>();
    ema.update({p, q}, step);
  }
  EXPECT_NEAR(ema.averages()[0][0].item<double>(), expected_p[0], 1e-12);
  EXPECT_NEAR(ema.averages()[0][1].item<double>(), expected_p[1], 1e-12);
  EXPECT_NEAR(ema.averages()[1][0].item<double>(), expected_q, 1e-12);
  EXPECT_FALSE(ema.averages()[0].equal(p)) << "the average lags the parameters";
}

TEST(WeightEma, SetAveragesRestoresACheckpointedAverage) {
  auto p = torch::zeros({3});
  WeightEma ema({p}, 0.9);
  ema.set_averages({torch::full({3}, 7.0)});
  EXPECT_TRUE(ema.averages()[0].equal(torch::full({3}, 7.0)));
  EXPECT_EQ(p.sum().item<float>(), 0.0f) << "the parameters are not touched";
}

// BatchNorm's running statistics are averaged as the parameters are (AveragedModel's
// use_buffers=True), so the average is evaluated with statistics of its own.
TEST(WeightEma, AveragesTheFloatingBuffersAsTheParameters) {
  auto p = torch::tensor({1.0}, torch::kFloat64);
  auto mean = torch::tensor({0.0, 4.0}, torch::kFloat64);
  WeightEma ema({p}, 0.5, {mean});
  std::vector<double> expected{0.0, 4.0};
  for (int64_t step = 0; step < 12; ++step) {
    mean.add_(1.0);
    const double d = std::min(0.5, (1.0 + step) / (10.0 + step));
    for (int i = 0; i < 2; ++i) expected[i] = d * expected[i] + (1 - d) * mean[i].item<double>();
    ema.update({p}, step, {mean});
  }
  ASSERT_EQ(ema.buffer_averages().size(), 1u);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(ema.buffer_averages()[0][i].item<double>(), expected[i], 1e-12);
  EXPECT_NE(ema.buffer_averages()[0][0].item<double>(), mean[0].item<double>()) << "not the live statistics";
}

}  // namespace
}  // namespace ddplab::train
