#include "ddplab/runner/outcome.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/rundir/health.h"
#include "ddplab/rundir/run_reader.h"
#include "ddplab/train/trainer.h"

namespace ddplab::runner {

using rundir::RunStatus;

Outcome done_outcome() { return Outcome{RunStatus::kDone, "", kExitOk, std::nullopt, std::nullopt}; }

Outcome outcome_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const train::Diverged& d) {
    return Outcome{RunStatus::kDiverged, d.what(), kExitDiverged, d.epoch, d.step};
  } catch (const train::Interrupted& i) {
    return Outcome{RunStatus::kInterrupted, i.what(), exit_code_for_signal(i.signal), std::nullopt, std::nullopt};
  } catch (const Error& u) {
    return Outcome{RunStatus::kFailed, message_of(u), kExitUserError, std::nullopt, std::nullopt};
  } catch (const std::exception& x) {
    return Outcome{RunStatus::kFailed, message_of(x), kExitFailure, std::nullopt, std::nullopt};
  }
}

Outcome outcome_of(const launch::LaunchResult& result) {
  Outcome o;
  o.exit_code = result.exit_code;
  if (result.exit_code == kExitOk) return done_outcome();
  if (result.exit_code == kExitDiverged) {
    o.status = RunStatus::kDiverged;
    o.message = result.reason;
  } else if (result.failed_rank >= 0) {
    o.status = RunStatus::kFailed;
    o.message = fmt::format("rank {} {}", result.failed_rank, result.reason);
  } else {
    o.status = is_signal_exit_code(result.exit_code) ? RunStatus::kInterrupted : RunStatus::kFailed;
    o.message = result.reason;
  }
  return o;
}

int exit_code_of(const std::exception_ptr& e) { return outcome_of(e).exit_code; }

void record(const rundir::RunLog& run, const Outcome& outcome) {
  run.update_manifest({{"exit_code", outcome.exit_code}});
  if (outcome.diverged_epoch) run.update_manifest({{"diverged_epoch", *outcome.diverged_epoch}});
  if (outcome.diverged_step) run.update_manifest({{"diverged_step", *outcome.diverged_step}});
  run.finish(outcome.status, outcome.message);
}

Outcome finished_outcome(const rundir::RunLog& run, const config::ExperimentSpec& spec) {
  const int64_t classes = config::known_classes(spec.dataset.name).value_or(10);
  std::vector<std::string> notes;  // a record that does not read is the report's to name
  const auto failed = rundir::failed_ending(rundir::read_epoch_records(run.dir(), notes), classes);
  if (!failed) return done_outcome();
  const bool diverged = failed->status == RunStatus::kDiverged;
  return Outcome{failed->status, failed->message, diverged ? kExitDiverged : kExitCollapsed, failed->epoch,
                 std::nullopt};
}

Outcome record_done(const rundir::RunLog& run, const config::ExperimentSpec& spec) {
  const Outcome outcome = finished_outcome(run, spec);
  record(run, outcome);
  if (spec.checkpoint.keep) return outcome;
  std::error_code ec;
  std::filesystem::remove(rundir::checkpoint_file(run.dir()), ec);
  return outcome;
}

}  // namespace ddplab::runner
