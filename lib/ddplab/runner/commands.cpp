#include "ddplab/runner/commands.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/report/report.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/outcome.h"
#include "ddplab/runner/sweep.h"

namespace fs = std::filesystem;

namespace ddplab::runner {

int validate(const std::string& path, const std::vector<std::string>& overrides) {
  const auto [doc, runs] = config::load_sweep(path, overrides);
  const auto spec = config::resolve(doc, path);
  const int code = check_before_running(runs);
  if (config::has_sweep(doc))
    complain(
        "ddplab: a sweep of {} run{}, {}; below, the spec without its sweep keys (`ddplab run --dry-run` lists "
        "the runs)",
        runs.size(), runs.size() == 1 ? "" : "s", code == kExitOk ? "all valid" : "not all valid (above)");
  say("{}", spec.resolved.dump(2));
  return code;
}

namespace {
// The flags of ReportFlags, checked as the schema checks the spec's report section.
void apply_report_flags(const ReportFlags& f, report::ReportOptions& options) {
  if (!(f.target == 0 || (f.target > 0 && f.target <= 1)))
    throw Error(fmt::format("--target: must be a test accuracy in (0, 1], e.g. 0.9, got {:g}", f.target));
  if (f.target > 0) options.target_acc = f.target;
  if (!(f.target_loss >= 0 && f.target_loss <= 1e6))
    throw Error(fmt::format("--target-loss: must be a training loss in (0, 1e6], e.g. 0.5, got {:g}", f.target_loss));
  if (f.target_loss > 0) options.target_loss = f.target_loss;
  if (!(f.equivalence_pts >= 0 && f.equivalence_pts <= 100))
    throw Error(
        fmt::format("--equivalence-pts: must be accuracy points in (0, 100], e.g. 0.5, got {:g}", f.equivalence_pts));
  if (f.equivalence_pts > 0) options.equivalence_pts = f.equivalence_pts;
  if (f.final_epochs < 0 || f.final_epochs > 100000)
    throw Error(fmt::format("--final-epochs: must be an integer in [1, 100000], got {}", f.final_epochs));
  if (f.final_epochs > 0) options.final_epochs = f.final_epochs;
}
}  // namespace

int report(const std::vector<std::string>& dirs, const std::string& out, const ReportFlags& flags) {
  report::ReportOptions options;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec))
      throw Error(fmt::format("{}: {}; give run or experiment directories", d,
                              fs::exists(d, ec) ? "not a directory" : "does not exist"));
    options.inputs.emplace_back(d);
  }
  options.out_dir = out.empty() ? fs::path(dirs.front()) : fs::path(out);
  apply_report_flags(flags, options);
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  const auto summary = report::write_report(options);
  std::string files;
  for (const auto& f : summary.files) files += fmt::format("\n  {}", f.string());
  say("ddplab: report of {} runs in {} groups:{}", summary.runs, summary.groups, files);
  return kExitOk;
}

int command_failed(const std::exception_ptr& e) {
  const int code = exit_code_of(e);
  std::string message;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    message = message_of(x);
  }
  if (code == kExitUserError)
    complain("ddplab: error: {}", message);
  else
    complain("ddplab: failed: {}", message);
  return code;
}

}  // namespace ddplab::runner
