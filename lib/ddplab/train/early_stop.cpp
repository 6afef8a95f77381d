#include "ddplab/train/early_stop.h"

#include <cmath>

#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace ddplab::train {

double EarlyStop::metric_of(const rundir::EpochRecord& rec) const {
  const auto& value = spec_.metric == config::StopMetric::kValAcc ? rec.val_acc : rec.val_loss;
  TORCH_INTERNAL_ASSERT(value.has_value(), "early_stop needs a validation split (the spec requires one)");
  return *value;
}

bool EarlyStop::improved(const rundir::EpochRecord& rec) {
  const double value = metric_of(rec);
  // A NaN never improves; val_acc is maximized, val_loss minimized.
  const double gain = spec_.metric == config::StopMetric::kValAcc ? value - best_ : best_ - value;
  if (best_epoch_ && !(gain > spec_.min_delta)) return false;
  if (!best_epoch_ && std::isnan(value)) return false;
  best_epoch_ = rec.epoch;
  best_ = value;
  return true;
}

bool EarlyStop::should_stop(int64_t epochs_done) const {
  return spec_.patience > 0 && best_epoch_ && epochs_done - *best_epoch_ >= spec_.patience;
}

void EarlyStop::restore(int64_t best_epoch, double best) {
  best_epoch_ = best_epoch;
  best_ = best;
}

nlohmann::json EarlyStop::manifest_entry(int64_t epochs_done) const {
  return {{"epochs_done", epochs_done},
          {"best_epoch", best_epoch_.value_or(0)},
          {"metric", config::name(spec_.metric)},
          {"best", best_}};
}

std::string EarlyStop::note(int64_t epochs_done) const {
  const int64_t best = best_epoch_.value_or(0);
  const int64_t since = epochs_done - best;
  return fmt::format("stopped early after epoch {}: {} has not improved on epoch {}'s {:.4f} for {} epoch{}",
                     epochs_done, config::name(spec_.metric), best, best_, since, since == 1 ? "" : "s");
}

}  // namespace ddplab::train
