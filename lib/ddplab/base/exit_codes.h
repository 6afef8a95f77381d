// ddplab's exit codes, for the CLI, its workers and the launcher that reads the workers' codes:
//
//   0          kExitOk         the run (every run of a sweep) finished
//   1          kExitFailure    a runtime failure: a rank died, an exception that is not a user error
//   2          kExitUserError  a user error (ddplab::Error): a bad spec, flag or data file
//   3          kExitDiverged   training diverged (NaN/Inf gradient or a blown-up loss); not a failure
//   4          kExitCollapsed  training ran to its end but the model ended near chance (rundir/health.h);
//                              not a failure of ddplab, a failed configuration
//   128 + sig  exit_code_for_signal(sig)  stopped cleanly by a signal (130 SIGINT, 143 SIGTERM),
//                                         as a shell reports a process killed by that signal
#pragma once

namespace ddplab {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUserError = 2;
constexpr int kExitDiverged = 3;
constexpr int kExitCollapsed = 4;

constexpr int exit_code_for_signal(int signal) { return 128 + signal; }
// Whether `code` is exit_code_for_signal of some signal: the run was stopped, not failed.
constexpr bool is_signal_exit_code(int code) { return code >= exit_code_for_signal(0); }

}  // namespace ddplab
