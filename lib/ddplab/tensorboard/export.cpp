#include "ddplab/tensorboard/export.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/report/report.h"
#include "ddplab/tensorboard/event_file.h"

namespace ddplab::tensorboard {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Scalar {
  int64_t step = 0;
  double wall_time = 0;
  std::string tag;
  double value = 0;
};

// Seconds since the epoch of a manifest time ("2026-12-02T08:46:03Z", rundir::utc_now); nullopt
// when the manifest has none.
std::optional<double> manifest_time(const json& manifest, const char* key) {
  const auto it = manifest.find(key);
  if (it == manifest.end() || !it->is_string()) return std::nullopt;
  std::tm tm{};
  const std::string text = it->get<std::string>();
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<double>(::timegm(&tm));
}

std::optional<HParamValue> hparam_value(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::nullopt;
  return v.dump();
}

// The run's scalars (export.h), sorted by step: TensorBoard's loader drops a tag's events beyond
// a step that comes later in the file, so every tag's steps must not decrease.
std::vector<Scalar> scalars_of(const report::RunData& run, double start) {
  std::vector<Scalar> out;
  const auto add = [&](int64_t step, double wall_s, const char* tag, double value) {
    if (std::isfinite(value)) out.push_back({step, start + wall_s, tag, value});
  };
  for (const auto& p : run.epochs) {
    const int64_t samples = p.step * p.global_batch;
    add(samples, p.wall_s, "train/loss", p.train_loss);
    add(samples, p.wall_s, "train/acc", p.train_acc);
    add(samples, p.wall_s, "test/loss", p.test_loss);
    add(samples, p.wall_s, "test/acc", p.test_acc);
    add(samples, p.wall_s, "lr", p.lr);
    add(samples, p.wall_s, "images_per_s", p.images_per_s);
    add(samples, p.wall_s, "comm_wait_s", p.comm_wait_s);
    add(samples, p.wall_s, "comm_bytes", p.comm_bytes);
    add(samples, p.wall_s, "grad_noise_scale", p.grad_noise_scale);
    add(samples, p.wall_s, "epoch", p.epoch);
  }
  for (const auto& s : run.steps) {
    add(s.samples, s.elapsed_s, "steps/train_loss", s.train_loss);
    add(s.samples, s.elapsed_s, "steps/train_acc", s.train_acc);
    add(s.samples, s.elapsed_s, "steps/lr", s.lr);
  }
  std::stable_sort(out.begin(), out.end(), [](const Scalar& a, const Scalar& b) { return a.step < b.step; });
  return out;
}

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
  const double start = manifest_time(manifest, "start").value_or(0);
  const double last_wall = run.epochs.empty() ? 0 : run.epochs.back().wall_s;
  const double end = manifest_time(manifest, "end").value_or(start + last_wall);
  EventFile file(start);
  file.add(session_start_event(start, session_of(data, run, start)));
  for (const Scalar& s : scalars_of(run, start)) file.add_scalar(s.wall_time, s.step, s.tag, s.value);
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
    const json manifest = rundir::read_manifest(run.dir);
    const EventFile file = event_file_of(data, run, manifest);
    std::error_code ec;
    fs::create_directories(targets[i], ec);
    if (ec) throw Error(fmt::format("{}: cannot create ({})", targets[i].string(), ec.message()));
    const json host = manifest.value("host", json("ddplab"));
    const fs::path path =
        targets[i] /
        event_file_name(manifest_time(manifest, "start").value_or(0),
                        host.is_string() && !host.get<std::string>().empty() ? host.get<std::string>() : "ddplab");
    file.write(path);
    summary.files.push_back(path);
  }
  return summary;
}

}  // namespace ddplab::tensorboard
