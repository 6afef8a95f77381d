#include "ddplab/train/loss.h"

#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::train {
namespace {

double value(const at::Tensor& t) { return t.item<double>(); }

// Two samples of 3 classes, both of class 0: logits (0, 0, 0) and (ln 3, 0, 5).
at::Tensor logits() { return torch::tensor({{0.0, 0.0, 0.0}, {std::log(3.0), 0.0, 5.0}}, torch::kFloat64); }
at::Tensor labels() { return torch::tensor({0, 0}, torch::kInt64); }

// -log(sigmoid(0)) = ln 2; -log(sigmoid(ln 3)) = -log(3/4) = ln(4/3).
TEST(Loss, OneSidedSigmoidLossIsMinusLogSigmoidOfTheTrueLogit) {
  EXPECT_NEAR(value(one_sided_sigmoid_loss(logits(), labels())), (std::log(2.0) + std::log(4.0 / 3.0)) / 2, 1e-12);
  EXPECT_NEAR(value(one_sided_sigmoid_loss(logits(), labels(), at::Reduction::Sum)), std::log(8.0 / 3.0), 1e-12);
}

// Cross-entropy of the same logits: ln 3 and ln(3 + 1 + e^5) - ln 3.
TEST(Loss, CrossEntropyOfTheSameLogitsDiffers) {
  const double expected = (std::log(3.0) + std::log(4.0 + std::exp(5.0)) - std::log(3.0)) / 2;
  EXPECT_NEAR(value(cross_entropy(logits(), labels())), expected, 1e-12);
  EXPECT_GT(value(cross_entropy(logits(), labels())), value(one_sided_sigmoid_loss(logits(), labels())) + 1);
}

// Only the true class's term: the wrong class's logit 5 (more likely than the true class under
// softmax) costs nothing, and gets no gradient.
TEST(Loss, OneSidedSigmoidLossIgnoresTheWrongClasses) {
  auto lower = logits();
  lower[1][2] = -5.0;
  EXPECT_EQ(value(one_sided_sigmoid_loss(lower, labels())), value(one_sided_sigmoid_loss(logits(), labels())));
  EXPECT_LT(value(cross_entropy(lower, labels())), value(cross_entropy(logits(), labels())));
  auto z = logits().requires_grad_();
  one_sided_sigmoid_loss(z, labels(), at::Reduction::Sum).backward();
  // d/dz_true softplus(-z_true) = -(1 - sigmoid(z_true)): -1/2 at 0, -1/4 at ln 3.
  EXPECT_TRUE(torch::allclose(z.grad(), torch::tensor({{-0.5, 0.0, 0.0}, {-0.25, 0.0, 0.0}}, torch::kFloat64)));
}

// Every logit large: the one-sided loss is ~0 although the prediction is a tie (cross-entropy: ln 3);
// a very wrong true logit stays finite where log(sigmoid(z)) would be -inf.
TEST(Loss, OneSidedSigmoidLossFallsToZeroWhenEveryOutputSaturates) {
  const auto all_high = torch::full({2, 3}, 30.0, torch::kFloat32);
  EXPECT_LT(value(one_sided_sigmoid_loss(all_high, labels())), 1e-12);
  EXPECT_NEAR(value(cross_entropy(all_high, labels())), std::log(3.0), 1e-6);
  const auto very_wrong = torch::full({2, 3}, -200.0, torch::kFloat32);
  EXPECT_NEAR(value(one_sided_sigmoid_loss(very_wrong, labels())), 200.0, 1e-3);
}

// Under autocast the logits are bf16; the loss is computed in fp32 as cross_entropy_loss is.
TEST(Loss, OneSidedSigmoidLossOfBf16LogitsIsFp32) {
  const auto loss = one_sided_sigmoid_loss(logits().to(torch::kBFloat16), labels());
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(value(loss), (std::log(2.0) + std::log(4.0 / 3.0)) / 2, 1e-2);
}

}  // namespace
}  // namespace ddplab::train
