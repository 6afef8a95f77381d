// The step records of log.every_steps (rundir::StepRecord, steps.jsonl), host side: which steps
// close an interval and what its record holds, made from the epoch's cumulative training sums
// over all replicas. The trainer all-reduces those sums on the device when an interval closes and
// reads them back when the next one closes (at once at the epoch's end), so no step waits for the
// device. Intervals restart at every epoch: one closes after every every_steps-th step of an epoch
// and after its last step. A pure state machine, testable without training.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "ddplab/rundir/run_log.h"

namespace ddplab::train {

// An evaluation point (log.eval_every_steps, train/evaluator.h): the mean loss and the accuracy on
// its images over all replicas, and the seconds it took (in the record's elapsed_s, not recorded).
struct EvalPoint {
  double loss = 0, acc = 0, seconds = 0;
};

class StepLog {
 public:
  // every_steps 0: off (closes_interval is always false). steps_per_epoch > 0.
  StepLog(int64_t every_steps, int64_t steps_per_epoch, int64_t global_batch);

  bool enabled() const { return every_steps_ > 0; }
  // Whether step `step` (0-based within its epoch) closes an interval.
  bool closes_interval(int64_t step) const;
  // Whether step `step` is the epoch's last.
  bool closes_epoch(int64_t step) const { return step + 1 == steps_per_epoch_; }
  // Epoch `epoch` (0-based) starts at step `first_step` of it (> 0 when resumed inside it) with
  // these training sums already in its totals (the checkpoint's partial ones, else 0).
  void start_epoch(int epoch, int64_t first_step, double loss_sum, double correct);
  // An interval closed after step `step` of the epoch; `global_steps`: steps taken so far in the
  // run, counting this one; lr of that step; seconds since the start of training; the evaluation
  // point there, if any.
  void close(int64_t step, int64_t global_steps, double lr, double elapsed_s,
             const std::optional<EvalPoint>& eval = std::nullopt);
  // The epoch's cumulative training loss sum and correct count (all replicas) as they were when
  // the oldest unread interval closed: completes its record.
  void read(double loss_sum, double correct);
  size_t unread() const { return unread_.size(); }
  // The completed records since the last take, oldest first.
  std::vector<rundir::StepRecord> take();

 private:
  int64_t every_steps_, steps_per_epoch_, global_batch_;
  int epoch_ = 0;
  int64_t closed_steps_ = 0;           // steps of the epoch up to the last closed interval
  double loss_sum_ = 0, correct_ = 0;  // the epoch's sums at the last read interval
  std::deque<rundir::StepRecord> unread_;
  std::vector<rundir::StepRecord> done_;
};

}  // namespace ddplab::train
