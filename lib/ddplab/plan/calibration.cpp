#include "ddplab/plan/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/lr_rule.h"
#include "ddplab/config/spec.h"
#include "ddplab/report/stats.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/rundir/run_reader.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Start-up: from the manifest's start to the training clock's start ("train_start", written since
// 2026-12-06 to the millisecond); for older runs, what the end leaves after the last record's
// wall_s (1 s resolution, teardown included). NaN without the times.
double startup_seconds(const json& manifest, double last_wall_s) {
  const auto start = rundir::manifest_time(manifest, "start");
  if (!start) return kNaN;
  if (const auto train = rundir::manifest_time(manifest, "train_start")) return std::max(0.0, *train - *start);
  const auto end = rundir::manifest_time(manifest, "end");
  return end ? std::max(0.0, *end - *start - last_wall_s) : kNaN;
}

// Step time and exposed communication per step: the medians over the epochs, so that an epoch
// slowed by another load on the host does not move them (the report names such runs).
void measure_timing(const std::vector<rundir::EpochRecord>& records, MeasuredRun& m) {
  std::vector<double> step_s, wait_s;
  double bytes = 0, steps = 0, eval_s = 0, prev_step = 0, prev_wall = 0, thr = 0;
  for (const auto& r : records) {
    const double epoch_steps = static_cast<double>(r.step) - prev_step;
    if (epoch_steps > 0 && std::isfinite(r.epoch_s)) {
      step_s.push_back(r.epoch_s / epoch_steps);
      wait_s.push_back(r.comm_wait_s / epoch_steps);
    }
    bytes += static_cast<double>(r.comm_bytes.value_or(0));
    steps += epoch_steps;
    eval_s += (r.wall_s - prev_wall) - r.epoch_s;
    thr += r.images_per_s;
    prev_step = static_cast<double>(r.step);
    prev_wall = r.wall_s;
  }
  const auto& last = records.back();
  m.epochs = static_cast<int>(records.size());
  m.replicas = last.replicas;
  m.global_batch = last.global_batch;
  m.timing.replicas = last.replicas;
  m.timing.per_replica_batch = static_cast<double>(last.global_batch) / std::max(1, last.replicas);
  m.timing.step_s = report::percentile(step_s, 0.5);
  m.timing.comm_wait_s = report::percentile(wait_s, 0.5);
  m.wire_bytes_per_step = steps > 0 ? bytes / steps : 0;
  m.steps_per_epoch = static_cast<double>(last.step) / std::max(1, last.epoch);
  m.eval_s = std::max(0.0, eval_s / static_cast<double>(records.size()));
  m.images_per_s = thr / static_cast<double>(records.size());
}

// The reference spans of a run's progress to `steps` steps: each epoch's steps with its B_simple
// (an epoch without one takes the nearest that has one); empty when no epoch has one.
std::vector<ProgressSpan> progress_to(const std::vector<rundir::EpochRecord>& records, double steps) {
  std::vector<ProgressSpan> spans;
  double prev = 0, last_phi = kNaN;
  for (const auto& r : records) {
    if (prev >= steps) break;
    const double phi = r.grad_noise_scale.value_or(kNaN);
    if (std::isfinite(phi) && phi > 0) last_phi = phi;
    spans.push_back({std::min(static_cast<double>(r.step), steps) - prev, phi});
    prev = static_cast<double>(r.step);
  }
  if (!std::isfinite(last_phi)) return {};
  double fill = kNaN;  // leading epochs without a value take the first measured one
  for (const auto& s : spans)
    if (std::isfinite(s.noise_scale) && s.noise_scale > 0 && !std::isfinite(fill)) fill = s.noise_scale;
  for (auto& s : spans) {
    if (std::isfinite(s.noise_scale) && s.noise_scale > 0)
      fill = s.noise_scale;
    else
      s.noise_scale = fill;
  }
  return spans;
}

void measure_target(const rundir::RunData& run, const Target& target, const std::vector<rundir::EpochRecord>& records,
                    MeasuredRun& m) {
  const auto health = run.health();
  m.health = health;
  m.timed = health && *health != rundir::RunHealth::kDiverged && std::isfinite(m.timing.step_s);
  if (health == rundir::RunHealth::kDiverged) m.left_out = "diverged";
  if (health == rundir::RunHealth::kCollapsed) m.left_out = "collapsed (near chance at the end)";
  if (!health) m.left_out = fmt::format("not finished ({})", run.status_text());
  if (!m.left_out.empty()) return;
  const double startup = std::isfinite(m.startup_s) ? m.startup_s : 0.0;
  if (target.loss) {
    if (run.steps.empty()) {
      m.left_out = "no step records (steps.jsonl: log.every_steps) for a training-loss target";
      return;
    }
    if (const rundir::StepRecord* r = run.steps_to_loss(*target.loss)) {
      m.steps_to_target = static_cast<double>(r->step);
      m.time_to_target_s = r->elapsed_s + startup;
    }
  } else if (target.acc) {
    const bool on_validation = std::all_of(run.epochs.begin(), run.epochs.end(),
                                           [](const rundir::EpochRecord& e) { return e.val_acc.has_value(); });
    if (const auto p = run.reaching(*target.acc, on_validation)) {
      m.steps_to_target = static_cast<double>(p->step);
      m.time_to_target_s = p->wall_s + startup;
    }
  }
  if (!m.steps_to_target) {
    m.left_out = fmt::format("did not reach {} in {} epochs", target.describe(), m.epochs);
    return;
  }
  m.progress = progress_to(records, *m.steps_to_target);
}
}  // namespace

std::string Target::describe() const {
  if (loss)
    return fmt::format("training loss {:.4g} (running mean over {:.0f} samples, step records)", *loss,
                       rundir::kLossWindowSamples);
  if (acc)
    return fmt::format("accuracy {:.1f}% (at evaluation points where runs have them, else epoch ends)", 100 * *acc);
  return "no target";
}

json Target::to_json() const {
  json j = json::object();
  if (loss) j["loss"] = *loss;
  if (acc) j["acc"] = *acc;
  return j;
}

Target Target::from_json(const json& j) {
  Target t;
  if (j.is_object() && j.contains("loss") && j["loss"].is_number()) t.loss = j["loss"].get<double>();
  if (j.is_object() && j.contains("acc") && j["acc"].is_number()) t.acc = j["acc"].get<double>();
  return t;
}

double rule_lr(const json& spec, double global_batch) {
  try {
    const config::ExperimentSpec s = config::resolve(spec, "spec.json");
    return s.optimizer.lr *
           config::lr_scale(s.schedule.scale_rule, global_batch, static_cast<double>(s.schedule.base_batch));
  } catch (const std::exception&) {
    return kNaN;
  }
}

MeasuredRun measure_run(const rundir::RunData& run, const Target& target) {
  MeasuredRun m;
  m.dir = run.dir;
  m.run_id = run.run_id;
  if (run.spec.is_object()) {
    m.seed = run.spec.value("seed", int64_t{0});
    m.bucket_mb = run.spec.contains("replicas") ? run.spec["replicas"].value("bucket_mb", 25.0) : 25.0;
  }
  const auto& records = run.epochs;
  if (records.empty()) {
    m.left_out = "no epoch records";
    m.timing.step_s = kNaN;
    return m;
  }
  measure_timing(records, m);
  m.host_cpu_wait_pct = run.mean_host_cpu_wait_pct();
  m.host_steal_pct = run.mean_host_steal_pct();
  m.lr = rule_lr(run.spec, static_cast<double>(m.global_batch));
  const json& manifest = run.manifest;
  const bool restarted = manifest.is_object() && manifest.contains("restarts");
  m.startup_s = restarted ? kNaN : startup_seconds(manifest, records.back().wall_s);
  measure_target(run, target, records, m);
  return m;
}

namespace {
// report.target_loss, else report.target_acc, of the first spec that has one.
Target target_of_specs(const std::vector<rundir::RunData>& runs) {
  Target t;
  for (const auto& r : runs) {
    if (!r.spec.is_object() || !r.spec.contains("report") || !r.spec["report"].is_object()) continue;
    const json& rep = r.spec["report"];
    if (rep.contains("target_loss") && rep["target_loss"].is_number()) t.loss = rep["target_loss"].get<double>();
    if (!t.loss && rep.contains("target_acc") && rep["target_acc"].is_number()) t.acc = rep["target_acc"].get<double>();
    if (t.loss || t.acc) break;
  }
  return t;
}
}  // namespace

Calibration read_calibration(const std::vector<fs::path>& dirs, Target target) {
  Calibration c;
  std::vector<rundir::RunData> runs;
  for (const auto& dir : rundir::find_run_dirs(dirs)) runs.push_back(rundir::read_run(dir, c.notes));
  if (!target.loss && !target.acc) target = target_of_specs(runs);
  if (!target.loss && !target.acc)
    throw Error(
        "plan: no target: give --target-loss (a training loss, from step records) or --target-acc, or set the "
        "specs' report.target_loss");
  c.target = target;
  bool spec_reached = false;  // c.spec is that of a run that reached the target
  for (const auto& r : runs) {
    c.runs.push_back(measure_run(r, target));
    const bool reached = c.runs.back().time_to_target_s.has_value();
    if (r.spec.is_object() && (c.spec.is_null() || (reached && !spec_reached))) {
      c.spec = r.spec;
      spec_reached = reached;
    }
    if (!c.runs.back().left_out.empty())
      c.notes.push_back(
          fmt::format("{}: left out of the steps fit: {}", c.runs.back().dir.string(), c.runs.back().left_out));
  }
  return c;
}

}  // namespace ddplab::plan
