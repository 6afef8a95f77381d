// What a Trainer reports while it trains, to whoever listens: by default the console (console.h),
// in a test an observer of its own. The Trainer itself prints nothing. Calls come on the training
// thread, in training order; an observer must not throw.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "ddplab/rundir/run_log.h"

namespace ddplab::train {

// Where this process is, after a step.
struct StepProgress {
  int epoch = 0;               // 0-based
  int64_t step = 0;            // in the epoch, 0-based
  int64_t steps = 0;           // steps per epoch
  double epoch_elapsed_s = 0;  // since the epoch began (a resumed epoch counts its part before the stop)
  // This process's mean training loss over the steps it ran in this epoch. It reads the device
  // (a wait for the step just queued), so an observer calls it only when it shows the value.
  std::function<double()> mean_loss;
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
