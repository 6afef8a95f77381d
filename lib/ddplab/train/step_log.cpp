#include "ddplab/train/step_log.h"

#include <c10/util/Exception.h>

namespace ddplab::train {

StepLog::StepLog(int64_t every_steps, int64_t steps_per_epoch, int64_t global_batch)
    : every_steps_(every_steps), steps_per_epoch_(steps_per_epoch), global_batch_(global_batch) {
  TORCH_INTERNAL_ASSERT(every_steps >= 0 && steps_per_epoch > 0 && global_batch > 0, "StepLog(", every_steps, ", ",
                        steps_per_epoch, ", ", global_batch, ")");
}

bool StepLog::closes_interval(int64_t step) const {
  return enabled() && ((step + 1) % every_steps_ == 0 || step + 1 == steps_per_epoch_);
}

void StepLog::start_epoch(int epoch, int64_t first_step, double loss_sum, double correct) {
  TORCH_INTERNAL_ASSERT(unread_.empty(), "StepLog: ", unread_.size(), " intervals of the last epoch not read");
  epoch_ = epoch;
  closed_steps_ = first_step;
  loss_sum_ = loss_sum;
  correct_ = correct;
}

void StepLog::close(int64_t step, int64_t global_steps, double lr, double elapsed_s,
                    const std::optional<EvalPoint>& eval) {
  TORCH_INTERNAL_ASSERT(step + 1 > closed_steps_, "StepLog: step ", step, " closes no new step");
  rundir::StepRecord r;
  r.step = global_steps;
  r.epoch = epoch_ + static_cast<double>(step + 1) / static_cast<double>(steps_per_epoch_);
  r.interval_steps = step + 1 - closed_steps_;
  r.lr = lr;
  r.samples = global_steps * global_batch_;
  r.elapsed_s = elapsed_s;
  if (eval) r.eval_loss = eval->loss, r.eval_acc = eval->acc;
  closed_steps_ = step + 1;
  unread_.push_back(r);
}

void StepLog::read(double loss_sum, double correct) {
  TORCH_INTERNAL_ASSERT(!unread_.empty(), "StepLog::read: no interval closed");
  rundir::StepRecord r = unread_.front();
  unread_.pop_front();
  const double samples = static_cast<double>(r.interval_steps * global_batch_);
  r.train_loss = (loss_sum - loss_sum_) / samples;
  r.train_acc = (correct - correct_) / samples;
  loss_sum_ = loss_sum;
  correct_ = correct;
  done_.push_back(r);
}

std::vector<rundir::StepRecord> StepLog::take() {
  std::vector<rundir::StepRecord> out;
  out.swap(done_);
  return out;
}

}  // namespace ddplab::train
