// The small commands of the CLI, and what all commands share (every command reads its spec with
// config::load_document: overrides applied, sweep keys still in):
//   validate        `ddplab validate`: a sweep is checked whole (every run it expands to must
//                   resolve; a note on stderr says how many), then the spec without its sweep keys
//                   is printed fully resolved;
//   report          `ddplab report`: report/report.h over run or experiment directories;
//   command_failed  what main says and returns for an exception that ended a command:
//                   "ddplab: error: ..." and kExitUserError for a ddplab::Error, "ddplab: failed:
//                   ..." and kExitFailure otherwise (the exit code from outcome.h).
#pragma once
#include <exception>
#include <string>
#include <vector>

namespace ddplab::runner {

int validate(const std::string& path, const std::vector<std::string>& overrides);

// `target` 0: not given (the specs' report.target_acc), else a test accuracy in (0, 1].
int report(const std::vector<std::string>& dirs, const std::string& out, double target);

int command_failed(const std::exception_ptr& e);

}  // namespace ddplab::runner
