// Whether a run that trained to its end failed to learn, judged from its epoch records, in one
// place: the runner reads it when a run finishes (manifest status and exit code, runner/outcome.h)
// and the report when it sorts runs into ok, collapsed and diverged (rundir::RunHealth, run_data.h).
//
//   near chance      the last record's training and test accuracies are both below
//                    kChanceAccFactor / classes: the model learnt nothing, not merely evaluates
//                    badly (one epoch with BatchNorm's running statistics not yet settled can
//                    test at 10% while it trains at 20%);
//   loss explosion   an epoch's mean training loss above kExplodedLossFactor x ln(classes): 23.0
//                    for 10 classes, 6x what a fresh network starts at (measured 42.7 in epoch 1 at
//                    lr 0.2, then the run sat at 10%). The trainer stops a run only at 100 x
//                    ln(classes) (train::loss_has_blown_up), since a bad epoch may still recover;
//                    one that does is not a failure.
//
// A run that ended near chance is "diverged" when its loss exploded on the way, else "collapsed".
// One that learnt, but little, is "poor" (ended_poor): not a failure, since its numbers are a
// setting's real result and enter every statistic, but named wherever runs are counted, so that
// "ok" means clearing a floor well above chance.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/rundir/run_log.h"

namespace ddplab::rundir {

constexpr double kChanceAccFactor = 1.5;
constexpr double kExplodedLossFactor = 10;

bool ended_near_chance(const EpochRecord& last, int64_t classes);
// The floor a run's final test accuracy must clear to be more than poor: kPoorAccFactor / classes
// (35% for 10 classes, where 1.5 / classes is near chance).
constexpr double kPoorAccFactor = 3.5;
// Whether the last record's test accuracy is under that floor while the run is not near chance.
bool ended_poor(const EpochRecord& last, int64_t classes);
// The first record whose training loss exploded (above), or nullptr.
const EpochRecord* loss_explosion(const std::vector<EpochRecord>& records, int64_t classes);

// How a run whose training returned ended: nullopt when it learnt something, else status
// kCollapsed or kDiverged (as above) and the message that says so: "collapsed to chance: test
// accuracy 10.15% (chance 10.00%), final training loss 2.3026 (ln 10 = 2.3026)", "diverged: the
// training loss exploded to 42.7 in epoch 1 (over 10 x ln 10 = 23.03; lr 0.2), then the run sat at
// chance: test accuracy 10.15%". `epoch` is the explosion's.
struct FailedEnding {
  RunStatus status = RunStatus::kCollapsed;
  std::string message;
  std::optional<int> epoch;
};
std::optional<FailedEnding> failed_ending(const std::vector<EpochRecord>& records, int64_t classes);

}  // namespace ddplab::rundir
