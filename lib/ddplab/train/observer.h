// What a Trainer reports while it trains, to whoever listens: by default the console (console.h),
// in a test an observer of its own. The Trainer itself prints nothing. Calls come on the training
// thread, in training order; an observer must not throw.
#pragma once
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "ddplab/rundir/run_log.h"

namespace ddplab::train {

// Where this process is, after a step.
struct StepProgress {
  int epoch = 0;               // 0-based
  int64_t step = 0;            // in the epoch, 0-based
  int64_t steps = 0;           // steps per epoch
  double epoch_elapsed_s = 0;  // since the epoch began (a resumed epoch counts its part before the stop)
  // This process's training loss sum so far in the epoch (0-dim, on the device), the part of it
  // that came from a checkpoint (rank 0 of a run resumed inside the epoch), and the samples this
  // process ran since: mean_loss() is their quotient.
  at::Tensor loss_sum;
  double restored_loss_sum = 0;
  double samples = 0;

  // Reads the device (a wait for the step just queued): an observer calls it only when it shows it.
  double mean_loss() const { return (loss_sum.item<double>() - restored_loss_sum) / samples; }
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  // After every step, on every rank.
  virtual void on_step(const StepProgress& /*progress*/) {}
  // On rank 0 (which writes the run directory), after the epoch's record was written.
  virtual void on_epoch(const rundir::EpochRecord& /*record*/) {}
  // On rank 0: something the user should know that is not a record ("the checkpoint holds ...").
  virtual void on_note(const std::string& /*note*/) {}
};

}  // namespace ddplab::train
