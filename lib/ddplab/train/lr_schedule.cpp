#include "ddplab/train/lr_schedule.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "ddplab/config/lr_rule.h"

namespace ddplab::train {

LrSchedule::LrSchedule(const config::OptimizerSpec& optimizer, const config::ScheduleSpec& schedule,
                       int64_t global_batch, int epochs)
    : base_lr_(optimizer.lr),
      scale_(config::lr_scale(schedule.scale_rule, static_cast<double>(global_batch),
                              static_cast<double>(schedule.base_batch))),
      schedule_(schedule),
      epochs_(epochs) {}

double LrSchedule::operator()(double e) const {
  const auto& s = schedule_;
  double warmup = 1.0;
  if (s.warmup_epochs > 0 && e < s.warmup_epochs)
    warmup = s.warmup_start_factor + (1.0 - s.warmup_start_factor) * e / s.warmup_epochs;
  double decay = 1.0;
  if (s.decay == config::Decay::kStep) {
    decay = std::pow(s.gamma, std::floor(e / s.step_epochs));
  } else if (s.decay == config::Decay::kMultistep) {
    int passed = 0;
    for (double m : s.milestones) passed += (e >= m) ? 1 : 0;
    decay = std::pow(s.gamma, passed);
  } else if (s.decay == config::Decay::kExponential) {
    decay = std::pow(s.gamma, e);
  } else if (s.decay == config::Decay::kCosine) {
    decay = s.min_factor + (1.0 - s.min_factor) * 0.5 * (1.0 + std::cos(M_PI * e / epochs_));
  }
  return base_lr_ * scale_ * warmup * decay;
}

std::pair<double, double> LrSchedule::peak(int64_t steps_per_epoch) const {
  std::pair<double, double> best{(*this)(0.0), 0.0};
  for (int i = 0; i < epochs_; ++i)
    for (int64_t k = 0; k < steps_per_epoch; ++k) {
      const double e = i + static_cast<double>(k) / static_cast<double>(steps_per_epoch);
      if ((*this)(e) > best.first) best = {(*this)(e), e};
    }
  return best;
}

nlohmann::json LrSchedule::manifest_entry(int64_t steps_per_epoch) const {
  const auto [lr, at] = peak(steps_per_epoch);
  return {{"spec", base_lr_}, {"scale", scale_}, {"scaled", base_lr_ * scale_}, {"peak", lr}, {"peak_epoch", at}};
}

}  // namespace ddplab::train
