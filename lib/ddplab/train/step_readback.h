// Each step's reduced gradient norm and the replicas' stop flag, read on the host one step late:
// on CUDA the host then never waits for the step it just queued (the epoch's last step is read at
// once). A NaN or Inf norm of an all-reduced gradient diverges the run at once: every rank saw the
// same norm at the same step. Under local SGD / EASGD a replica's gradient is its own: the first
// such norm is kept (local_divergence()) and every rank stops at the replicas' next agreement.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ddplab/runtime/device.h"
#include "ddplab/train/run_ends.h"

namespace ddplab::train {

class StepReadback {
 public:
  StepReadback(c10::Device device, int rank) : readback_(device), rank_(rank) {}

  // After step `global_step` of lr `lr`: its squared gradient norm and stop flag (1-element
  // tensors on the device; no host sync). `local`: the gradient is this replica's own.
  void push(const at::Tensor& grad_sq, const at::Tensor& stop_flag, int64_t global_step, double lr, bool local);
  int pending() const { return readback_.pending(); }
  // Reads the oldest pushed step of epoch `epoch` (0-based): adds its norm to `grad_norm_sum`;
  // returns whether the replicas agreed to stop after it. Throws Diverged for a reduced NaN or Inf.
  bool read(int epoch, double& grad_norm_sum);
  const std::optional<Diverged>& local_divergence() const { return local_divergence_; }

 private:
  struct Unread {
    int64_t step = 0;  // global step
    double lr = 0;
    bool local = false;
  };
  runtime::HostReadback readback_;
  std::deque<Unread> unread_;  // of each value pushed
  int rank_;
  std::optional<Diverged> local_divergence_;
};

}  // namespace ddplab::train
