#include "ddplab/tensorboard/export.h"

#include <map>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/report/report.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/tensorboard/event_file.h"
#include "ddplab/tensorboard/run_events.h"

namespace ddplab::tensorboard {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

SessionStart session_of(const report::ReportData& data, const report::RunData& run, double start) {
  const report::GroupStats& group = data.groups.at(run.group);
  SessionStart session;
  session.group_name = group.label;
  session.start_time_secs = start;
  for (const auto& [key, value] : group.values.items())
    if (auto v = hparam_value(value)) session.hparams[key] = *v;
  if (run.spec.is_object() && run.spec.contains("seed"))
    if (auto v = hparam_value(run.spec["seed"])) session.hparams["seed"] = *v;
  return session;
}

EventFile event_file_of(const report::ReportData& data, const report::RunData& run, const json& manifest) {
  const double start = rundir::manifest_time(manifest, "start").value_or(0);
  const double clock = rundir::manifest_time(manifest, "train_start").value_or(start);
  const double last_wall = run.epochs.empty() ? 0 : run.epochs.back().wall_s;
  const double end = rundir::manifest_time(manifest, "end").value_or(clock + last_wall);
  EventFile file(start);
  file.add(session_start_event(start, session_of(data, run, start)));
  for (const Scalar& s : run_scalars(run, clock)) file.add_scalar(s.wall_time, s.step, s.tag, s.value);
  file.add(session_end_event(end, session_status(run.status), end));
  return file;
}

bool is_within(const fs::path& path, const fs::path& dir) {
  const fs::path rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// Refuses an output that would write into a run directory, or two runs into one directory.
void check_targets(const report::ReportData& data, const std::vector<fs::path>& targets, const fs::path& out_dir) {
  std::map<fs::path, size_t> taken;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const fs::path run_dir = fs::weakly_canonical(data.runs[i].dir);
    if (is_within(fs::weakly_canonical(out_dir), run_dir))
      throw Error(fmt::format("--out {}: lies inside the run directory {}; export writes beside runs, never into them",
                              out_dir.string(), data.runs[i].dir.string()));
    for (const fs::path& target : targets)
      if (is_within(fs::weakly_canonical(target), run_dir))
        throw Error(fmt::format("--out {}: would write into the run directory {}; choose another directory",
                                out_dir.string(), data.runs[i].dir.string()));
    const auto [it, fresh] = taken.emplace(targets[i], i);
    if (!fresh)
      throw Error(fmt::format("{} and {}: both export to {} (same experiment and run id); export them separately",
                              data.runs[it->second].dir.string(), data.runs[i].dir.string(), targets[i].string()));
  }
}

}  // namespace

SessionStatus session_status(std::optional<rundir::RunStatus> status) {
  if (!status) return SessionStatus::kUnknown;
  switch (*status) {
    case rundir::RunStatus::kDone:
      return SessionStatus::kSuccess;
    case rundir::RunStatus::kFailed:
    case rundir::RunStatus::kDiverged:
    case rundir::RunStatus::kCollapsed:
    case rundir::RunStatus::kInterrupted:
      return SessionStatus::kFailure;
    case rundir::RunStatus::kRunning:
      return SessionStatus::kRunning;
  }
  return SessionStatus::kUnknown;
}

ExportSummary export_runs(const ExportOptions& options) {
  report::ReportOptions report_options;
  report_options.inputs = options.inputs;
  const report::ReportData data = report::analyze(report_options);
  std::vector<fs::path> targets;
  for (const auto& run : data.runs) targets.push_back(options.out_dir / run.experiment / run.run_id);
  check_targets(data, targets, options.out_dir);
  ExportSummary summary;
  summary.warnings = data.warnings;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const report::RunData& run = data.runs[i];
    const json& manifest = run.manifest;
    const EventFile file = event_file_of(data, run, manifest);
    std::error_code ec;
    fs::create_directories(targets[i], ec);
    if (ec) throw Error(fmt::format("{}: cannot create ({})", targets[i].string(), ec.message()));
    const fs::path path =
        targets[i] / event_file_name(rundir::manifest_time(manifest, "start").value_or(0), manifest_host(manifest));
    file.write(path);
    summary.files.push_back(path);
  }
  return summary;
}

}  // namespace ddplab::tensorboard
