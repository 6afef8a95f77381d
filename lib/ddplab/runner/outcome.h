// How a run ended, in one place: what ended it (training returned, Diverged, Interrupted, a
// ddplab::Error, any other exception, or what the launcher reports of its workers) maps to the
// manifest's status, the manifest's message and the process's exit code (base/exit_codes.h):
//
//   returned                     done         ""                     kExitOk
//     ... near chance            collapsed    "collapsed to chance: ..."  kExitCollapsed  (rundir/health.h)
//     ... near chance after a loss explosion  diverged  "diverged: ..."  kExitDiverged  (+ epoch)
//   train::Diverged              diverged     what()                 kExitDiverged  (+ epoch, step)
//   train::Interrupted           interrupted  what()                 exit_code_for_signal(signal)
//   ddplab::Error                failed       message_of(e)          kExitUserError
//   any other std::exception     failed       message_of(e)          kExitFailure
//   launch: exit code 0          done         ""                     kExitOk
//   launch: kExitDiverged        diverged     the rank's error       kExitDiverged
//   launch: a rank failed        failed       "rank <r> <reason>"    the launcher's code (kExitFailure)
//   launch: stopped by a signal  interrupted  the launcher's reason  the launcher's code (128 + signal)
//
// run_one (in-process runs, launches and their restarts), the worker and the sweep all use it.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "ddplab/launch/launcher.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::runner {

struct Outcome {
  rundir::RunStatus status = rundir::RunStatus::kDone;
  std::string message;  // for the manifest and the console; "" for done
  int exit_code = 0;
  // Where a diverged run stopped (the manifest's diverged_epoch, diverged_step), when known.
  std::optional<int> diverged_epoch;
  std::optional<int64_t> diverged_step;
};

// Training returned: done.
Outcome done_outcome();
// The exception `e` (from std::current_exception() in a catch block) that ended a run. Anything
// that is not a std::exception is rethrown.
Outcome outcome_of(const std::exception_ptr& e);
// What the launcher reports of a launch.
Outcome outcome_of(const launch::LaunchResult& result);
// The exit code of an exception that ended a command (kExitUserError for ddplab::Error, ...).
int exit_code_of(const std::exception_ptr& e);

// Writes `outcome` to the run's manifest: its exit_code, diverged_epoch/diverged_step when known,
// then the status and message (RunLog::finish).
void record(const rundir::RunLog& run, const Outcome& outcome);
// How a run whose training returned ended, from its epoch records (rundir::failed_ending, the
// classes of spec's dataset, 10 where ddplab does not know them, as the report): done_outcome(), or
// collapsed or diverged with their message and exit code.
Outcome finished_outcome(const rundir::RunLog& run, const config::ExperimentSpec& spec);
// Records the finished_outcome of a run whose training returned and removes its checkpoint.pt
// unless the spec's checkpoint.keep: a finished run is never resumed, and model.pt holds its final
// model. Returns the outcome.
Outcome record_done(const rundir::RunLog& run, const config::ExperimentSpec& spec);

}  // namespace ddplab::runner
