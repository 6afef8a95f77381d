// The learning rate as a pure function of the fractional epoch e (never of the step count):
//
//   lr(e) = optimizer.lr * scale * warmup(e) * decay(e)
//   scale     = 1 | k | sqrt(k)  for scale_rule none | linear | sqrt, k = global_batch / base_batch
//   warmup(e) = f + (1 - f) * e / W for e < W (W = warmup_epochs, f = warmup_start_factor), else 1
//   decay(e)  = constant: 1;  step: gamma^floor(e / step_epochs);
//               multistep: gamma^(number of milestones <= e);  exponential: gamma^e;
//               cosine: m + (1 - m) * (1 + cos(pi * e / epochs)) / 2  (m = min_factor)
//
// The trainer sets it before every step from that step's e = epoch + step / steps_per_epoch,
// so changing the replica count (and with it steps per epoch) never shifts the schedule.
#pragma once
#include <cstdint>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "ddplab/config/spec.h"

namespace ddplab::train {

class LrSchedule {
 public:
  LrSchedule(const config::OptimizerSpec& optimizer, const config::ScheduleSpec& schedule, int64_t global_batch,
             int epochs);

  double scale() const { return scale_; }
  double operator()(double epoch) const;  // epoch >= 0, fractional

  // The highest lr of the steps the run takes (step k of epoch i at e = i + k / steps_per_epoch,
  // as the trainer sets it) and the first e where it is: {lr, e}.
  std::pair<double, double> peak(int64_t steps_per_epoch) const;
  // manifest.json's "lr_schedule": {"spec": optimizer.lr, "scale": scale(), "scaled": their product,
  // "peak": peak's lr, "peak_epoch": its e}: the lr as scheduled, which the records sample only at
  // each epoch's last step.
  nlohmann::json manifest_entry(int64_t steps_per_epoch) const;

 private:
  double base_lr_, scale_;
  config::ScheduleSpec schedule_;
  int epochs_;
};

}  // namespace ddplab::train
