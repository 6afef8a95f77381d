// The small commands of the CLI, and what all commands share (every command reads its spec with
// config::load_document: overrides applied, sweep keys still in):
//   validate        `ddplab validate`: a sweep is checked whole (every run it expands to must
//                   resolve, find its data and pass the set-up checks a run makes before training,
//                   check_before_running in sweep.h; a note on stderr says how many), then the spec
//                   without its sweep keys is printed fully resolved; kExitUserError when a run
//                   would be refused;
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

// `ddplab report`'s settings; 0 means not given (the specs' report section, else its defaults).
struct ReportFlags {
  double target = 0;           // --target: a test accuracy in (0, 1]
  double target_loss = 0;      // --target-loss: a training loss > 0
  double equivalence_pts = 0;  // --equivalence-pts: in (0, 100]
  int final_epochs = 0;        // --final-epochs: >= 1
};
int report(const std::vector<std::string>& dirs, const std::string& out, const ReportFlags& flags);

int command_failed(const std::exception_ptr& e);

}  // namespace ddplab::runner
