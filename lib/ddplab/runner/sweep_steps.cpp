#include "ddplab/runner/sweep_steps.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ddplab/base/error.h"
#include "ddplab/report/report.h"
#include "ddplab/runner/console.h"

namespace fs = std::filesystem;

namespace ddplab::runner {

using rundir::RunStatus;

std::string minutes_seconds(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

double epochs_to_train(const config::SweepRun& run, bool force) {
  const double all = run.spec.epochs;
  const auto dir = rundir::run_dir(run.spec);
  if (force || !rundir::holds_resumable_run(dir)) return all;
  const auto mark = rundir::CheckpointMark::of(rundir::read_manifest(dir));
  if (!mark) return all;
  const double done = static_cast<double>(mark->epochs_done);
  const double in_epoch = mark->epochs_done > 0
                              ? static_cast<double>(mark->step_in_epoch) /
                                    (static_cast<double>(mark->global_step - mark->step_in_epoch) / done)
                              : 0.0;
  return std::max(0.0, all - done - std::min(in_epoch, 1.0));
}

std::string eta(double spent_s, double trained_epochs, double left_epochs) {
  if (trained_epochs <= 0) return "-:--";
  return minutes_seconds(spent_s / trained_epochs * left_epochs);
}

// A sweep with --force runs every run, whatever its directory holds. A malformed manifest is an
// Error naming it.
std::optional<RunStatus> status_unless_forced(const config::SweepRun& run, bool force) {
  return force ? std::nullopt : rundir::read_status(rundir::run_dir(run.spec));
}

std::vector<ChangedRun> changed_runs(const std::vector<config::SweepRun>& runs) {
  std::vector<ChangedRun> changed;
  for (const auto& run : runs)
    if (auto changes = rundir::spec_changes(rundir::run_dir(run.spec), run.spec); !changes.empty())
      changed.push_back({run.run_id, std::move(changes)});
  return changed;
}

void refuse_changed_runs(const std::vector<config::SweepRun>& runs, bool force) {
  if (force) return;
  const auto changed = changed_runs(runs);
  if (changed.empty()) return;
  std::string lines;
  for (const auto& c : changed) lines += fmt::format("\n  {}: {}", c.run_id, fmt::join(c.changes, "; "));
  throw Error(fmt::format(
      "{}: {} of {} run director{} hold{} runs of a different spec, which this sweep would not reuse; nothing was "
      "run or changed:{}\nPass --force to replace them, or give another output or name (output=DIR, name=NAME) to "
      "keep them",
      rundir::experiment_dir(runs.front().spec).string(), changed.size(), runs.size(), runs.size() == 1 ? "y" : "ies",
      changed.size() == 1 ? "s" : "", lines));
}

void record_sweep_runs(const std::vector<config::SweepRun>& runs) {
  const fs::path dir = rundir::sweep_dir(rundir::experiment_dir(runs.front().spec));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the sweep's directory: {}", dir.string(), ec.message()));
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& run : runs) ids.push_back(run.run_id);
  rundir::write_file_atomic(rundir::sweep_runs_file(dir.parent_path()),
                            fmt::format("{}\n", nlohmann::json{{"runs", ids}}.dump(2)));
}

std::string disk_use_line(const config::ExperimentSpec& spec) {
  const fs::path dir = rundir::experiment_dir(spec);
  std::uintmax_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  return fmt::format("ddplab: {} holds {:.1f} MB", dir.string(), static_cast<double>(bytes) / 1e6);
}

// A manifest that cannot be read was already reported as the run's failure.
std::pair<std::optional<RunStatus>, std::string> manifest_after(const fs::path& dir) {
  std::pair<std::optional<RunStatus>, std::string> out;
  try {
    out.first = rundir::read_status(dir);
    out.second = rundir::read_manifest(dir).value("message", "");
  } catch (const std::exception&) {
  }
  return out;
}

void write_experiment_report(const config::ExperimentSpec& spec) {
  const fs::path experiment_dir = rundir::experiment_dir(spec);
  try {
    report::ReportOptions options;
    options.inputs = {experiment_dir};
    options.out_dir = experiment_dir;
    auto summary = report::write_report(options);
    say("ddplab: report of {} runs in {} groups: {}", summary.runs, summary.groups,
        (experiment_dir / "report.html").string());
  } catch (const std::exception& e) {
    complain("ddplab: the report could not be written: {}", message_of(e));
  }
}

}  // namespace ddplab::runner
