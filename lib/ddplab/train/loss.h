// The losses the trainer computes, in training and in evaluation.
//
// cross_entropy: softmax cross-entropy of the logits, what the trainer uses (torch's
// cross_entropy_loss). one_sided_sigmoid_loss: the bug of a home-made MNIST loop that debug.fault
// "one_sided_sigmoid_loss" reproduces: sigmoid outputs y^ = sigmoid(z) with the cross-entropy
// -sum_k y_k log(y^_k) of a one-hot y, so only the true class's term, -log(sigmoid(z_true)). It
// falls toward 0 as every logit grows (nothing pushes the wrong classes' outputs down), while the
// accuracy, argmax of the logits, stays poor. Computed as softplus(-z_true), which equals it and
// stays finite where log(sigmoid(z)) would underflow to -inf.
//
// logits: [B, C] (any float dtype); labels: [B] int64 in [0, C). `reduction`: at::Reduction::Mean
// (the mean over the batch, a scalar) or at::Reduction::Sum (the sum, a scalar).
#pragma once
#include <cstdint>

#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>

namespace ddplab::train {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels, int64_t reduction = at::Reduction::Mean);

at::Tensor one_sided_sigmoid_loss(const at::Tensor& logits, const at::Tensor& labels,
                                  int64_t reduction = at::Reduction::Mean);

}  // namespace ddplab::train
