#include "ddplab/rundir/health.h"

#include <cmath>

#include <fmt/format.h>

#include "ddplab/base/error.h"

namespace ddplab::rundir {
namespace {
double uniform_loss(int64_t classes) { return std::log(static_cast<double>(classes)); }
}  // namespace

bool ended_near_chance(const EpochRecord& last, int64_t classes) {
  const double chance = kChanceAccFactor / static_cast<double>(classes);
  return !(last.train_acc >= chance) && !(last.test_acc >= chance);
}

bool ended_poor(const EpochRecord& last, int64_t classes) {
  return !ended_near_chance(last, classes) && last.test_acc < kPoorAccFactor / static_cast<double>(classes);
}

const EpochRecord* loss_explosion(const std::vector<EpochRecord>& records, int64_t classes) {
  for (const auto& r : records)
    if (r.train_loss > kExplodedLossFactor * uniform_loss(classes)) return &r;
  return nullptr;
}

std::optional<FailedEnding> failed_ending(const std::vector<EpochRecord>& records, int64_t classes) {
  if (records.empty() || !ended_near_chance(records.back(), classes)) return std::nullopt;
  const EpochRecord& last = records.back();
  if (const EpochRecord* e = loss_explosion(records, classes))
    return FailedEnding{RunStatus::kDiverged,
                        fmt::format("diverged: the training loss exploded to {:.4g} in epoch {} (over {:g} x ln {} = "
                                    "{:.2f}; lr {:g}), then the run sat at chance: test accuracy {:.2f}%",
                                    e->train_loss, e->epoch, kExplodedLossFactor, classes,
                                    kExplodedLossFactor * uniform_loss(classes), e->lr, 100 * last.test_acc),
                        e->epoch};
  return FailedEnding{RunStatus::kCollapsed,
                      fmt::format("collapsed to chance: test accuracy {:.2f}% (chance {:.2f}%), final training loss "
                                  "{:.4f} (ln {} = {:.4f})",
                                  100 * last.test_acc, 100.0 / static_cast<double>(classes), last.train_loss, classes,
                                  uniform_loss(classes)),
                      std::nullopt};
}

}  // namespace ddplab::rundir
