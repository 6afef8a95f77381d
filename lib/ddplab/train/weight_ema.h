// An exponential moving average of the parameters, for evaluation (spec model.ema_decay), as
// TensorFlow's tf.train.ExponentialMovingAverage(decay, num_updates=global_step), which the TF
// CIFAR-10 tutorial evaluates:
//
//   after optimizer step t (0-based):  d_t = min(decay, (1 + t) / (10 + t))
//                                      ema = d_t * ema + (1 - d_t) * param
//
// starting from the parameters as they are when the average is made (the broadcast initial
// weights). The warm-up of d_t lets the average forget the initial weights quickly in the first
// steps. Every replica holds the same average of the parameters (they are the same after each
// all-reduce step), so no communication is needed.
//
// The model's floating-point buffers (BatchNorm's running mean and variance) are averaged the same
// way, as torch.optim.swa_utils.AveragedModel(use_buffers=True) does, and the average is
// evaluated and saved with them: the live model's statistics belong to the live weights, not to
// the average (resnet20 at ema_decay 0.999 was evaluated with them before). Averaging was chosen
// over recomputing the statistics for the average (swa_utils.update_bn) because it costs no pass
// over the data at each evaluation and is resumable from the checkpoint alone; its statistics
// are those of the recent models the average is made of, not a fresh pass of the averaged one.
// Integer buffers (num_batches_tracked) are not averaged.
#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ddplab::train {

class WeightEma {
 public:
  // `params`: the model's parameters, `buffers`: its floating-point buffers (the same tensors later
  // passed to update()); decay in (0, 1).
  WeightEma(const std::vector<at::Tensor>& params, double decay, const std::vector<at::Tensor>& buffers = {});

  // The decay applied after step `step` (0-based), d_t above.
  double decay_at(int64_t step) const;

  // Folds the parameters and buffers after optimizer step `step` into the average.
  void update(const std::vector<at::Tensor>& params, int64_t step, const std::vector<at::Tensor>& buffers = {});

  // The averages, one per parameter, same shapes and devices (for evaluation, the saved model,
  // checkpoints).
  const std::vector<at::Tensor>& averages() const { return averages_; }
  // The buffers' averages, one per floating-point buffer given to the constructor.
  const std::vector<at::Tensor>& buffer_averages() const { return buffer_averages_; }
  // Replace the averages (resume from a checkpoint); shapes must match.
  void set_averages(const std::vector<at::Tensor>& averages);
  void set_buffer_averages(const std::vector<at::Tensor>& averages);

 private:
  double decay_;
  std::vector<at::Tensor> averages_;
  std::vector<at::Tensor> buffer_averages_;
};

}  // namespace ddplab::train
