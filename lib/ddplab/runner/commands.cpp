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

namespace fs = std::filesystem;

namespace ddplab::runner {

int validate(const std::string& path, const std::vector<std::string>& overrides) {
  const auto doc = config::load_document(path, overrides);
  size_t sweep_runs = 0;
  if (config::has_sweep(doc)) sweep_runs = config::expand_sweep(doc, path, config::sweep_key_order(path)).size();
  const auto spec = config::resolve(doc, path);
  if (sweep_runs > 0)
    complain("ddplab: a sweep of {} run{}, all valid; below, the spec without its sweep keys (`ddplab run --dry-run` "
             "lists the runs)",
             sweep_runs, sweep_runs == 1 ? "" : "s");
  say("{}", spec.resolved.dump(2));
  return kExitOk;
}

int report(const std::vector<std::string>& dirs, const std::string& out, double target) {
  report::ReportOptions options;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec))
      throw Error(fmt::format("{}: {}; give run or experiment directories", d,
                              fs::exists(d, ec) ? "not a directory" : "does not exist"));
    options.inputs.emplace_back(d);
  }
  options.out_dir = out.empty() ? fs::path(dirs.front()) : fs::path(out);
  if (!(target == 0 || (target > 0 && target <= 1)))  // 0: not given
    throw Error(fmt::format("--target: must be a test accuracy in (0, 1], e.g. 0.9, got {:g}", target));
  if (target > 0) options.target_acc = target;
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
