#include "ddplab/runner/plan_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/datasets.h"
#include "ddplab/config/spec.h"
#include "ddplab/plan/check.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/allreduce_probe.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/sweep.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::runner {
namespace {

// The largest calibration cost, as a share of the grid's (its cells x the spec's repeats, full
// epochs), above which `ddplab plan` says that the calibration is not small.
constexpr double kCalibrationShare = 0.20;
constexpr int64_t kTimingSteps = 40;

std::string joined(const std::vector<fs::path>& files) {
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.string());
  return fmt::format("{}", fmt::join(names, ", "));
}

json base_calibration_doc(const json& doc, const std::string& dir, const std::string& suffix) {
  json d = doc;
  d.erase("sweep");
  d.erase("sweep_zip");
  d["repeats"] = 1;
  d["output"] = dir;
  d["name"] = fmt::format("{}-{}", doc.value("name", std::string("plan")), suffix);
  json batch = d.value("batch", json::object());
  batch.erase("per_replica");
  batch.erase("global");
  d["batch"] = batch;
  return d;
}

std::pair<int64_t, int64_t> steps_batches(const std::vector<plan::GridCell>& grid) {
  std::set<int64_t> batches;
  for (const auto& c : grid) batches.insert(c.global_batch);
  const int64_t lo = *batches.begin(), hi = *batches.rbegin();
  const double middle = std::sqrt(static_cast<double>(lo) * static_cast<double>(hi));
  int64_t mid = hi;  // ascending, so that the larger of two batches equally near wins (the wider range)
  for (int64_t b : batches)
    if (b != lo && std::abs(std::log(b / middle)) <= std::abs(std::log(mid / middle)) + 1e-9) mid = b;
  return {lo, mid};
}

int steps_replicas(const std::vector<plan::GridCell>& grid) {
  int n = 0;
  for (const auto& c : grid)
    if (c.replicas >= 2 && (n == 0 || c.replicas < n)) n = c.replicas;
  return n == 0 ? 1 : n;
}

json timing_doc(const json& doc, const std::string& dir, int n, const std::set<int64_t>& batches) {
  json d = base_calibration_doc(doc, dir, fmt::format("calibration-timing-N{}", n));
  d["replicas"]["count"] = n;
  d["batch"]["per_replica"] = *batches.begin();
  d["sweep"] = {{"batch.per_replica", json(batches)}};
  d["epochs"] = 1;
  const int64_t limit = kTimingSteps * n * *batches.rbegin();
  const int64_t given = d.value("dataset", json::object()).value("train_limit", int64_t{0});
  d["dataset"]["train_limit"] = given > 0 ? std::min(given, limit) : limit;
  return d;
}
}  // namespace

std::vector<json> calibration_specs(const json& doc, const std::vector<plan::GridCell>& grid, const std::string& dir,
                                    int cores) {
  TORCH_INTERNAL_ASSERT(!grid.empty());
  std::vector<json> out;
  json steps = base_calibration_doc(doc, dir, "calibration-steps");
  const auto [lo, mid] = steps_batches(grid);
  const int n_steps = steps_replicas(grid);
  steps["replicas"]["count"] = n_steps;
  steps["batch"]["global"] = lo;
  steps["sweep"] = {{"batch.global", lo == mid ? json::array({lo}) : json::array({lo, mid})}};
  // Step records every 10 steps unless the spec has them; log.eval_every_steps closes records too.
  const json log = steps.value("log", json::object());
  if (log.value("every_steps", 0) <= 0 && log.value("eval_every_steps", 0) <= 0) steps["log"]["every_steps"] = 10;
  out.push_back(steps);
  std::map<int, std::set<int64_t>> untimed;  // per replica count: the per-replica batches to time
  for (const auto& c : grid) {
    const int64_t b = c.global_batch / c.replicas;
    const bool by_steps = c.replicas == n_steps && (b == lo / n_steps || b == mid / n_steps);
    if (c.replicas <= cores && !by_steps) untimed[c.replicas].insert(b);
  }
  for (const auto& [n, batches] : untimed) out.push_back(timing_doc(doc, dir, n, batches));
  return out;
}

namespace {
// How many replicas of `spec` this machine runs at once: one process per GPU for CUDA over NCCL
// (NCCL refuses two ranks on one GPU), else one per core.
int replica_slots(const config::ExperimentSpec& spec) {
  if (spec.replicas.device == config::Device::kCuda && spec.replicas.backend == config::Backend::kNccl)
    return static_cast<int>(torch::cuda::device_count());
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

plan::Target target_of(const PlanRequest& r) {
  plan::Target t;
  if (r.target_loss < 0 || r.target_acc < 0 || r.target_acc > 1)
    throw Error("--target-loss must be a training loss > 0 and --target-acc an accuracy in (0, 1]");
  if (r.target_loss > 0 && r.target_acc > 0) throw Error("--target-loss and --target-acc: give one of them");
  if (r.target_loss > 0) t.loss = r.target_loss;
  if (r.target_acc > 0) t.acc = r.target_acc;
  return t;
}

// Epochs of the full training set a spec document's runs take, for the cost comparison.
double full_epochs(const json& d, int64_t train_size) {
  const config::ExperimentSpec spec = config::resolve(d);
  const int64_t limit = spec.dataset.train_limit > 0 ? std::min(spec.dataset.train_limit, train_size) : train_size;
  return static_cast<double>(spec.epochs) * static_cast<double>(limit) / static_cast<double>(train_size);
}

// The grid's cost in full-data epochs: its cells x the spec's repeats x the spec's epochs.
double grid_cost(const json& doc, const std::vector<plan::GridCell>& grid, int64_t train_size) {
  return static_cast<double>(grid.size()) * doc.value("repeats", 1) * full_epochs(doc, train_size);
}

// Runs the calibration sweeps into `dir`, one after another. A sweep that fails leaves the plan to
// what the others measured; one stopped by a signal stops the calibration, as it stops a sweep:
// its exit code (128 + signal), else kExitOk.
int run_calibration(const std::string& spec_path, const std::vector<plan::GridCell>& grid, const fs::path& dir) {
  const json doc = config::load_document(spec_path);
  const config::ExperimentSpec spec = config::resolve(doc, spec_path);
  const auto docs = calibration_specs(doc, grid, dir.string(), replica_slots(spec));
  const int64_t train_size = config::dataset_info(spec.dataset.name).train_size;
  double cost = 0;
  for (const auto& d : docs) {
    const json sweep = d["sweep"];
    cost += full_epochs(d, train_size) * static_cast<double>(sweep.begin()->size());
  }
  const double grid_epochs = grid_cost(doc, grid, train_size);
  say("ddplab plan: calibration of {} sweeps, {:.1f} full-data epochs against the grid's {:.1f} ({} cells x {} "
      "repeats): {:.0f}%{}",
      docs.size(), cost, grid_epochs, grid.size(), doc.value("repeats", 1), 100 * cost / grid_epochs,
      cost > kCalibrationShare * grid_epochs ? fmt::format(" (above {:.0f}%: a small grid)", 100 * kCalibrationShare)
                                             : std::string());
  for (const auto& d : docs) {
    fs::create_directories(dir);
    const fs::path file = dir / fmt::format("{}.json", d["name"].get<std::string>());
    rundir::write_file_atomic(file, d.dump(2) + "\n");
    const int code = run_sweep(file.string(), {}, false, false);
    if (is_signal_exit_code(code)) {
      say("ddplab plan: calibration stopped in {}; the same command finishes it (done runs are kept)", file.string());
      return code;
    }
    if (code != kExitOk)
      say("ddplab plan: {} ended with exit code {}; planning from what it left", file.string(), code);
  }
  return kExitOk;
}

// The steps sweep of the calibration at one more global batch, `batch` (plan::batch_to_calibrate),
// at the steps runs' replica count when it divides the batch, else 1.
json targeted_steps_doc(const json& doc, const std::vector<plan::GridCell>& grid, const fs::path& dir, int64_t batch) {
  json d = base_calibration_doc(doc, dir.string(), fmt::format("calibration-steps-B{}", batch));
  const int n = steps_replicas(grid);
  d["replicas"]["count"] = batch % n == 0 ? n : 1;
  d["batch"]["global"] = batch;
  const json log = d.value("log", json::object());
  if (log.value("every_steps", 0) <= 0 && log.value("eval_every_steps", 0) <= 0) d["log"]["every_steps"] = 10;
  return d;
}

// Runs the calibration at the batch where the steps models disagree on a cell that could win
// (plan::batch_to_calibrate), once: its cost is that of one steps run, stated. Returns
// whether it ran (then the plan is made again), or the signal exit code through `code`.
bool calibrate_where_models_disagree(const std::string& spec_path, const std::vector<plan::GridCell>& grid,
                                     const fs::path& dir, const plan::Plan& first, int& code) {
  double gap = 0;
  const auto batch = plan::batch_to_calibrate(first, &gap);
  if (!batch) return false;
  const json doc = config::load_document(spec_path);
  const json d = targeted_steps_doc(doc, grid, dir, *batch);
  const config::ExperimentSpec spec = config::resolve(doc, spec_path);
  const int64_t train_size = config::dataset_info(spec.dataset.name).train_size;
  const double cost = full_epochs(d, train_size);
  say("ddplab plan: the steps models differ by {:.0f}% at global batch {}, where a cell could be the fastest: "
      "running it to the target ({:.1f} full-data epochs, {:.0f}% of the grid's)",
      100 * gap, *batch, cost, 100 * cost / grid_cost(doc, grid, train_size));
  const fs::path file = dir / fmt::format("{}.json", d["name"].get<std::string>());
  rundir::write_file_atomic(file, d.dump(2) + "\n");
  code = run_sweep(file.string(), {}, false, false);
  if (!is_signal_exit_code(code)) code = kExitOk;
  return true;
}

// The grid's replica counts from 2 to replica_slots(spec): those the probe can run here.
std::vector<int> probe_counts(const std::vector<plan::GridCell>& grid, const config::ExperimentSpec& spec) {
  std::set<int> counts;
  for (const auto& c : grid)
    if (c.replicas >= 2 && c.replicas <= replica_slots(spec)) counts.insert(c.replicas);
  return {counts.begin(), counts.end()};
}

int check(const PlanRequest& r) {
  if (r.inputs.empty()) throw Error("plan --check: give the run directories to score the plan on");
  std::vector<fs::path> dirs(r.inputs.begin(), r.inputs.end());
  const plan::CheckResult result = plan::check_plan(r.check, dirs);
  const fs::path out = r.out.empty() ? fs::path(r.check).parent_path() : fs::path(r.out);
  const auto files = plan::write_check(result, out.empty() ? fs::path(".") : out);
  say("{}", plan::render_check_markdown(result));
  say("ddplab plan --check: wrote {}", joined(files));
  return kExitOk;
}
}  // namespace

int plan_command(const PlanRequest& r) {
  if (!r.check.empty()) return check(r);
  const auto grid = plan::parse_grid(r.grid);
  fs::path out = r.out;
  std::vector<fs::path> calibration(r.calibration.begin(), r.calibration.end());
  if (calibration.empty()) {
    if (r.inputs.size() != 1)
      throw Error("plan: give one spec to calibrate from (ddplab plan SPEC --grid ...), or --calibration DIR...");
    if (out.empty()) {
      const config::ExperimentSpec spec = config::load(r.inputs.front());
      out = fs::path(spec.output) / fmt::format("{}-plan", spec.name);
    }
    calibration.push_back(out / "calibration");
    if (const int code = run_calibration(r.inputs.front(), grid, calibration.back()); code != kExitOk) return code;
  } else if (out.empty()) {
    out = calibration.front();
  }
  plan::Calibration c = plan::read_calibration(calibration, target_of(r));
  const bool may_probe = (r.calibration.empty() || r.probe) && !c.runs.empty();
  const std::string spec_file = may_probe ? rundir::spec_file(c.runs.front().dir).string() : std::string();
  const auto probe = may_probe ? ensure_probe(calibration.front(), spec_file,
                                              probe_counts(grid, config::resolve(config::load_document(spec_file))))
                               : reuse_probe(calibration);
  plan::Plan p = plan::make_plan(c, grid, probe);
  int code = kExitOk;
  if (r.calibration.empty() && calibrate_where_models_disagree(r.inputs.front(), grid, calibration.back(), p, code)) {
    if (code != kExitOk) return code;
    c = plan::read_calibration(calibration, target_of(r));
    p = plan::make_plan(c, grid, probe);
  }
  for (const auto& note : p.notes) complain("note: {}", note);
  const auto files = plan::write_plan(p, out);
  say("{}", plan::render_plan_markdown(p));
  say("ddplab plan: wrote {} (predictions hash {})", joined(files), p.hash);
  return kExitOk;
}

}  // namespace ddplab::runner
