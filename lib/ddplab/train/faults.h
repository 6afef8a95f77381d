// debug.fault as the step path meets it, in one place (config: spec.h's Fault; docs/spec.md):
//   crash, throw: rank debug.rank dies (SIGKILL) or throws before global step debug.step;
//   stop: rank debug.rank asks every rank to stop cleanly from step debug.step on, as SIGTERM does;
//   update_first_only: every gradient but the first parameter's is dropped before the optimizer
//     step (the home-made averaging loop with a `return` inside);
//   one_sided_sigmoid_loss: -log(sigmoid(true class's logit)) instead of the cross-entropy;
//   eval_first_half: only the first half of the test set is evaluated.
// crash, throw and stop never fire in a resumed attempt. (skip_broadcast acts at set-up:
// make_network seeds each rank differently and the Trainer skips the initial broadcast.)
#pragma once
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"

namespace ddplab::train {

class DebugFaults {
 public:
  DebugFaults(const config::DebugSpec& debug, int rank, bool resumed);

  // Before global step `global_step`: crash or throw when due.
  void before_step(int64_t global_step) const;
  // Whether fault stop has fired at or before `global_step` (asked until the replicas agree).
  bool stop_wanted(int64_t global_step);
  // After backward, before the optimizer step.
  void on_gradients(const std::vector<at::Tensor>& params) const;
  // The training and evaluation loss of `logits` [B, classes] for labels `y` [B].
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& y, int64_t reduction) const;
  // How many of a test set of `size` samples are evaluated.
  int64_t test_samples(int64_t size) const;
  bool skip_broadcast() const { return debug_.has(config::Fault::kSkipBroadcast); }

 private:
  bool due(config::Fault fault, int64_t global_step) const;

  const config::DebugSpec& debug_;
  int rank_;
  bool armed_;
  bool stop_fired_ = false;
};

}  // namespace ddplab::train
