// An exponential moving average of the parameters, for evaluation (spec model.ema_decay), as
// TensorFlow's tf.train.ExponentialMovingAverage(decay, num_updates=global_step), which the TF
// CIFAR-10 tutorial evaluates:
//
//   after optimizer step t (0-based):  d_t = min(decay, (1 + t) / (10 + t))
//                                      ema = d_t * ema + (1 - d_t) * param
//
// starting from the parameters as they are when the average is made (the broadcast initial
// weights). The warm-up of d_t lets the average forget the initial weights quickly in the first
// steps. Every replica holds the same average (its parameters are the same after each all-reduce
// step), so no communication is needed. Parameters only: buffers stay the model's.
#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ddplab::train {

class WeightEma {
 public:
  // `params`: the model's parameters (the same tensors later passed to update()); decay in (0, 1).
  WeightEma(const std::vector<at::Tensor>& params, double decay);

  // The decay applied after step `step` (0-based), d_t above.
  double decay_at(int64_t step) const;

  // Folds the parameters after optimizer step `step` into the average.
  void update(const std::vector<at::Tensor>& params, int64_t step);

  // The averages, one per parameter, same shapes and devices (for evaluation, the saved model,
  // checkpoints).
  const std::vector<at::Tensor>& averages() const { return averages_; }
  // Replaces the averages (resume from a checkpoint); shapes must match.
  void set_averages(const std::vector<at::Tensor>& averages);

 private:
  double decay_;
  std::vector<at::Tensor> averages_;
};

}  // namespace ddplab::train
