// log.every_steps in the trainer: when an interval closes (StepLog, step_log.h) every rank
// all-reduces the epoch's training sums on the device, and rank 0 reads them back when the next
// interval closes, or at once after the epoch's last step, where the host waits anyway; so no
// step waits for the device. A clean stop closes the open interval with the stop's partial sums.
// Intervals close every LogSpec::step_record_every() steps, so every evaluation point of
// log.eval_every_steps (train/evaluator.h) falls on a record and is written into it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ddplab/distributed/comm.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runtime/device.h"
#include "ddplab/train/step_log.h"

namespace ddplab::train {

class StepRecorder {
 public:
  // `every_steps`: LogSpec::step_record_every(); `comm`: null for one process; `lead`: this rank
  // keeps the records (rank 0).
  StepRecorder(int64_t every_steps, int64_t steps_per_epoch, int64_t global_batch,
               std::shared_ptr<distributed::Comm> comm, bool lead, c10::Device device);

  // As StepLog::start_epoch.
  void start_epoch(int epoch, int64_t first_step, double loss_sum, double correct);
  // After step `step` of the epoch (0-based; `global_steps` taken so far, counting it): closes an
  // interval when one ends there. `loss_sum` (float64) and `correct` (int64) are this process's
  // cumulative training sums of the epoch, 0-dim tensors on the device; `eval`: the evaluation
  // point after this step, if one fell there (it must close an interval). A collective when it closes.
  void after_step(int64_t step, int64_t global_steps, double lr, double elapsed_s, const at::Tensor& loss_sum,
                  const at::Tensor& correct, const std::optional<EvalPoint>& eval = std::nullopt);
  // A clean stop after step `step`: closes the open interval with the stop's partial sums over
  // all replicas (already all-reduced) unless one closed there.
  void at_stop(int64_t step, int64_t global_steps, double lr, double elapsed_s, double loss_sum, double correct);
  // The completed records since the last take (rank 0; empty elsewhere).
  std::vector<rundir::StepRecord> take() { return log_.take(); }

 private:
  void read_oldest();

  StepLog log_;
  std::shared_ptr<distributed::Comm> comm_;
  bool lead_;
  runtime::HostReadback readback_;
};

}  // namespace ddplab::train
