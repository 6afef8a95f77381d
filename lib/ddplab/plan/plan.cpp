#include "ddplab/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/base/sha256.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/spec.h"
#include "ddplab/report/stats.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int64_t> parse_values(const std::string& arg, const std::string& list) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1)
      throw Error(fmt::format("--grid {}: \"{}\" is not a positive integer", arg, item));
    out.push_back(v);
    start = comma + 1;
  }
  return out;
}

// The mean of `xs` at the key nearest to `n` (the lower on a tie); NaN when empty.
double nearest_mean(const std::map<int, std::vector<double>>& xs, int n) {
  const std::vector<double>* best = nullptr;
  int best_key = 0;
  for (const auto& [k, v] : xs)
    if (!best || std::abs(k - n) < std::abs(best_key - n)) {
      best = &v;
      best_key = k;
    }
  return best ? report::mean(*best) : kNaN;
}

// The calibration's runs usable for timing: finished runs with a measured step time.
std::vector<const MeasuredRun*> timed_runs(const Calibration& c) {
  std::vector<const MeasuredRun*> out;
  for (const auto& r : c.runs)
    if (r.timed && r.timing.step_s > 0) out.push_back(&r);
  return out;
}

void fit_step_time_model(const Calibration& c, const std::optional<AllReduceProbe>& probe, Plan& p) {
  std::vector<StepTiming> timings;
  double payload = 0, bucket_mb = 25;
  for (const MeasuredRun* r : timed_runs(c)) {
    timings.push_back(r->timing);
    if (r->replicas > 1 && r->wire_bytes_per_step > 0) payload = r->wire_bytes_per_step / ring_factor(r->replicas);
    bucket_mb = r->bucket_mb;
  }
  const int buckets = bucket_count(payload, bucket_mb);
  p.step_time = fit_step_time(timings, payload, buckets, probe ? std::optional<CommFit>(probe->fit) : std::nullopt);
  if (p.step_time.comm_measured) {
    p.probe = probe;
    p.step_time_fitted = fit_step_time(timings, payload, buckets);
  } else if (probe) {
    p.notes.push_back(fmt::format(
        "{}: not used: no calibration run at 2+ replicas gives the gradient bytes an all-reduce carries", probe->file));
  }
  for (const MeasuredRun* r : timed_runs(c)) {
    const StepTiming& t = r->timing;
    p.step_fit.push_back({r->run_id, t.replicas, t.per_replica_batch, t.step_s,
                          p.step_time.step_s(t.replicas, t.per_replica_batch), t.comm_wait_s,
                          p.step_time.exposed_comm_s(t.replicas, t.per_replica_batch)});
  }
  if (!std::any_of(timings.begin(), timings.end(), [](const StepTiming& t) { return t.replicas > 1; }))
    p.notes.push_back(
        "no calibration run at 2+ replicas: communication is not modelled, so every replica count above 1 is "
        "predicted as compute alone (flagged)");
  else if (!p.step_time.latency_fitted && !p.step_time.comm_measured)
    p.notes.push_back(
        "one replica count above 1 calibrated: bandwidth and latency cannot be told apart, so the communication "
        "time is put on bandwidth alone (latency 0)");
}

// The McCandlish fit on the mean steps per global batch over seeds, and the noise-scale references.
void fit_steps_model(const Calibration& c, Plan& p, std::vector<const MeasuredRun*>& references) {
  std::map<int64_t, std::vector<double>> by_batch, lrs;
  for (const auto& r : c.runs) {
    if (!r.left_out.empty() || !r.steps_to_target) continue;
    by_batch[r.global_batch].push_back(*r.steps_to_target);
    lrs[r.global_batch].push_back(r.lr);
    if (!r.progress.empty() && r.replicas > 1) references.push_back(&r);
  }
  std::vector<double> batches, steps;
  for (const auto& [b, s] : by_batch) {
    p.calibrated_steps[b] = report::mean(s);
    p.calibrated_lrs[b] = report::mean(lrs[b]);
    batches.push_back(static_cast<double>(b));
    steps.push_back(p.calibrated_steps[b]);
  }
  p.noise_reference_runs = static_cast<int>(references.size());
  if (batches.size() < 2)
    p.steps_fit_refusal = fmt::format("steps to the target at {} global batch{} (needs 2 or more)", batches.size(),
                                      batches.size() == 1 ? "" : "es");
  else
    p.steps_fit_refusal = report::tradeoff_refusal(batches, steps);
  if (p.steps_fit_refusal.empty()) p.steps_fit = report::fit_batch_tradeoff(batches, steps);
  if (!p.steps_fit && p.steps_fit_refusal.empty())
    p.steps_fit_refusal = "the fit is not physical (S_min or B_crit not positive)";
  p.steps_source = !p.steps_fit         ? "noise scale"
                   : references.empty() ? "McCandlish fit"
                                        : "McCandlish fit within the calibrated batches, noise scale beyond them";
  if (!p.steps_fit && references.empty())
    throw Error(fmt::format(
        "plan: no steps model: McCandlish's fit has {}, and no calibration run at 2+ replicas that reached {} "
        "logged the noise scale; run the target at 2 or more global batches (or with replicas.count >= 2)",
        p.steps_fit_refusal, c.target.describe()));
}

double noise_estimate(const std::vector<const MeasuredRun*>& references, double batch) {
  std::vector<double> xs;
  for (const MeasuredRun* r : references)
    xs.push_back(noise_scale_steps(r->progress, static_cast<double>(r->global_batch), batch));
  return xs.empty() ? kNaN : report::mean(xs);
}

// Eval seconds and start-up per calibrated replica count, and the training samples per epoch.
struct Overheads {
  std::map<int, std::vector<double>> eval_s, startup_s;
  double samples_per_epoch = 0;
};
Overheads overheads_of(const Calibration& c) {
  Overheads o;
  for (const MeasuredRun* r : timed_runs(c)) {
    o.eval_s[r->replicas].push_back(r->eval_s);
    if (std::isfinite(r->startup_s)) o.startup_s[r->replicas].push_back(r->startup_s);
    o.samples_per_epoch = std::max(o.samples_per_epoch, r->steps_per_epoch * static_cast<double>(r->global_batch));
  }
  return o;
}

void set_reference(const Calibration& c, Plan& p) {
  std::map<std::pair<int, int64_t>, std::vector<const MeasuredRun*>> cells;
  for (const auto& r : c.runs)
    if (r.left_out.empty() && r.time_to_target_s) cells[{r.replicas, r.global_batch}].push_back(&r);
  if (cells.empty()) return;
  const auto& [key, runs] = *cells.begin();
  p.reference = {key.first, key.second};
  std::vector<double> ttt, epochs;
  for (const MeasuredRun* r : runs) {
    ttt.push_back(*r->time_to_target_s);
    epochs.push_back(*r->steps_to_target / r->steps_per_epoch);
  }
  p.reference_ttt_s = report::mean(ttt);
  p.reference_epochs = report::mean(epochs);
}

// The calibrated range of per-replica batches at each timed replica count.
std::map<int, std::pair<double, double>> timed_ranges(const Calibration& c) {
  std::map<int, std::pair<double, double>> out;
  for (const MeasuredRun* r : timed_runs(c)) {
    auto [it, fresh] = out.try_emplace(r->replicas, r->timing.per_replica_batch, r->timing.per_replica_batch);
    it->second.first = std::min(it->second.first, r->timing.per_replica_batch);
    it->second.second = std::max(it->second.second, r->timing.per_replica_batch);
  }
  return out;
}

// The lr flag (kLrFarFactor): "" when the cell's lr is within the calibrated lrs and near one.
std::string lr_flag(const Plan& p, const CellPlan& cell) {
  std::vector<double> lrs;
  for (const auto& [b, lr] : p.calibrated_lrs)
    if (std::isfinite(lr) && lr > 0) lrs.push_back(lr);
  if (lrs.empty() || !std::isfinite(cell.lr) || !(cell.lr > 0)) return "";
  constexpr double kSame = 1 + 1e-9;  // lrs printed and parsed back may differ in the last bits
  const double lo = *std::min_element(lrs.begin(), lrs.end()), hi = *std::max_element(lrs.begin(), lrs.end());
  if (cell.lr * kSame < lo || cell.lr > hi * kSame)
    return fmt::format("lr {:.4g} ({} rule) outside the lrs run to the target ({:.4g}..{:.4g})", cell.lr, p.lr_rule, lo,
                       hi);
  double nearest = lrs.front();
  for (double lr : lrs)
    if (std::max(cell.lr / lr, lr / cell.lr) < std::max(cell.lr / nearest, nearest / cell.lr)) nearest = lr;
  if (std::max(cell.lr / nearest, nearest / cell.lr) > kLrFarFactor * kSame)
    return fmt::format("lr {:.4g} ({} rule) more than {:g}x from the nearest lr run to the target ({:.4g})", cell.lr,
                       p.lr_rule, kLrFarFactor, nearest);
  return "";
}

// "RUN: CPU wait 95%, steal 0%" for a timed run of `replicas` over kLoadedTimingPct (the busiest),
// else "".
std::string loaded_timing(const Calibration& c, int replicas) {
  const MeasuredRun* worst = nullptr;
  const auto load = [](const MeasuredRun& r) {
    return std::max(std::isfinite(r.host_cpu_wait_pct) ? r.host_cpu_wait_pct : 0.0,
                    std::isfinite(r.host_steal_pct) ? r.host_steal_pct : 0.0);
  };
  for (const auto& r : c.runs)
    if (r.timed && r.replicas == replicas && load(r) > kLoadedTimingPct && (!worst || load(r) > load(*worst)))
      worst = &r;
  if (!worst) return "";
  return fmt::format("{}: CPU wait {:.0f}%, steal {:.0f}%", worst->run_id, worst->host_cpu_wait_pct,
                     worst->host_steal_pct);
}

// A step time the host's load or a disagreement of the timings made: under load, or N replicas
// predicted faster per image than one.
void load_flags(const CellPlan& cell, const Calibration& c, std::vector<std::string>& flags) {
  if (const std::string busy = loaded_timing(c, cell.replicas); !busy.empty())
    flags.push_back(fmt::format("step time at {} replica{} timed under load ({})", cell.replicas,
                                cell.replicas == 1 ? "" : "s", busy));
  if (cell.replicas == 1 || !(cell.scaling_efficiency > 1)) return;
  const std::string one = loaded_timing(c, 1);
  flags.push_back(fmt::format(
      "scaling efficiency {:.2f} above 1: {}", cell.scaling_efficiency,
      one.empty() ? fmt::format("the step times timed at 1 and {} replicas disagree (time them again)", cell.replicas)
                  : fmt::format("one replica's step time was timed under load ({})", one)));
}

// A calibration run at the cell's global batch (so at its lr) that collapsed or diverged: a finding
// about the cell, not only a run left out of the fit.
void failure_flags(CellPlan& cell, const Calibration& c, std::vector<std::string>& flags) {
  for (const auto& r : c.runs)
    if (r.global_batch == cell.global_batch &&
        (r.health == rundir::RunHealth::kCollapsed || r.health == rundir::RunHealth::kDiverged)) {
      cell.may_not_train = true;
      flags.push_back(fmt::format("a calibration run at this global batch {} ({} x {}, {}): it may not train here",
                                  r.health == rundir::RunHealth::kCollapsed ? "collapsed to chance" : "diverged",
                                  r.replicas, r.global_batch, r.run_id));
    }
}

// Where the cell lies outside what the calibration measured.
std::vector<std::string> cell_flags(const Plan& p, CellPlan& cell, const Calibration& c) {
  std::vector<std::string> flags;
  failure_flags(cell, c, flags);
  load_flags(cell, c, flags);
  const auto ranges = timed_ranges(c);
  const auto range = ranges.find(cell.replicas);
  if (!p.step_time.compute.count(cell.replicas))
    flags.push_back(
        fmt::format("compute time at {} replicas not calibrated (taken from the nearest count timed)", cell.replicas));
  else if (p.step_time.compute_scaled.count(cell.replicas))
    flags.push_back(
        fmt::format("compute curve at {} replicas scaled from another count's (one batch timed)", cell.replicas));
  else if (range != ranges.end() &&
           (cell.per_replica_batch < range->second.first || cell.per_replica_batch > range->second.second))
    flags.push_back(fmt::format("per-replica batch {:.0f} outside the timed {:.0f}..{:.0f}", cell.per_replica_batch,
                                range->second.first, range->second.second));
  const int max_timed = ranges.empty() ? 1 : ranges.rbegin()->first;
  if (cell.replicas > max_timed)
    flags.push_back(
        fmt::format("communication at {} replicas extrapolated (timed up to {})", cell.replicas, max_timed));
  if (!p.calibrated_steps.empty()) {
    const double lo = static_cast<double>(p.calibrated_steps.begin()->first);
    const double hi = static_cast<double>(p.calibrated_steps.rbegin()->first);
    if (cell.global_batch < lo || cell.global_batch > hi)
      flags.push_back(fmt::format("global batch outside the batches run to the target ({:.0f}..{:.0f})", lo, hi));
  }
  if (p.steps_fit && cell.global_batch > kFarAboveCriticalBatch * p.steps_fit->b_crit)
    flags.push_back(fmt::format("global batch {:.1f} x B_crit (~{:.0f})",
                                static_cast<double>(cell.global_batch) / p.steps_fit->b_crit, p.steps_fit->b_crit));
  if (std::string lr = lr_flag(p, cell); !lr.empty()) flags.push_back(std::move(lr));
  const double warmup =
      c.spec.is_object() && c.spec.contains("schedule") ? c.spec["schedule"].value("warmup_epochs", 0.0) : 0.0;
  const double steps_per_epoch = std::ceil(p.samples_per_epoch / static_cast<double>(cell.global_batch));
  if (warmup > 0 && cell.steps < 3 * warmup * steps_per_epoch)
    flags.push_back(fmt::format("fewer than 3 x the warmup's {:.0f} steps", warmup * steps_per_epoch));
  return flags;
}

// The steps estimate the plan uses at global batch b: McCandlish's fit within the global batches
// run to the target, where it interpolates; beyond them the noise-scale estimate when there is one,
// since a fit on few batches says little there (on 2 it passes through both exactly, and the first
// pre-registered check, docs/planner.md, found it 14-27% short beyond them); else whichever exists.
double steps_estimate(const Plan& p, const std::vector<const MeasuredRun*>& references, double b) {
  const bool inside = !p.calibrated_steps.empty() && b >= static_cast<double>(p.calibrated_steps.begin()->first) &&
                      b <= static_cast<double>(p.calibrated_steps.rbegin()->first);
  if (p.steps_fit && (inside || references.empty())) return p.steps_fit->steps(b);
  return noise_estimate(references, b);
}

// The pooled seed-to-seed CV of steps to the target (PredictionSpread) and the step-time model's
// residual.
PredictionSpread spread_of(const Calibration& c, const StepTimeModel& m) {
  std::map<int64_t, std::vector<double>> by_batch;
  for (const auto& r : c.runs)
    if (r.left_out.empty() && r.steps_to_target) by_batch[r.global_batch].push_back(*r.steps_to_target);
  PredictionSpread s;
  double squares = 0, dof = 0;
  for (const auto& [b, steps] : by_batch) {
    if (steps.size() < 2) continue;
    const double cv = report::sample_std(steps) / report::mean(steps);
    squares += cv * cv * static_cast<double>(steps.size() - 1);
    dof += static_cast<double>(steps.size() - 1);
    ++s.seed_batches;
  }
  s.seed_cv = dof > 0 ? std::sqrt(squares / dof) : kNaN;
  s.step_log_rms = std::isfinite(m.log_rms) ? m.log_rms : 0.0;
  return s;
}

// The cell's interval: the times at the least and the most steps its models give, widened in
// log space by the seed and step-time spread (PredictionSpread).
void set_interval(const PredictionSpread& spread, const std::function<double(double)>& ttt_at_steps, CellPlan& cell) {
  double lo = cell.steps, hi = cell.steps;
  for (double s : {cell.steps_fit, cell.steps_noise})
    if (std::isfinite(s)) lo = std::min(lo, s), hi = std::max(hi, s);
  const double seed = std::isfinite(spread.seed_cv) ? spread.seed_cv : 0.0;
  const double width = kIntervalZ * std::sqrt(seed * seed + spread.step_log_rms * spread.step_log_rms);
  cell.ttt_low_s = ttt_at_steps(lo) * std::exp(-width);
  cell.ttt_high_s = ttt_at_steps(hi) * std::exp(width);
}

CellPlan predict_cell(const Plan& p, const GridCell& g, const Overheads& o,
                      const std::vector<const MeasuredRun*>& references, bool loss_target) {
  CellPlan cell;
  cell.replicas = g.replicas;
  cell.global_batch = g.global_batch;
  const double batch = static_cast<double>(g.global_batch);
  cell.per_replica_batch = batch / g.replicas;
  cell.step_s = p.step_time.step_s(g.replicas, cell.per_replica_batch);
  cell.steps_fit = p.steps_fit ? p.steps_fit->steps(batch) : kNaN;
  cell.steps_noise = noise_estimate(references, batch);
  cell.steps = steps_estimate(p, references, batch);
  const double steps_per_epoch = std::ceil(p.samples_per_epoch / batch);
  const double eval_s = nearest_mean(o.eval_s, g.replicas), startup_s = nearest_mean(o.startup_s, g.replicas);
  const double startup = std::isfinite(startup_s) ? startup_s : 0.0;
  const auto whole_epoch = static_cast<int64_t>(steps_per_epoch);
  const auto ttt_at_steps = [&](double steps) {
    if (!std::isfinite(steps)) return kNaN;
    return time_to_target(steps, cell.step_s,
                          static_cast<double>(evaluations_to_target(steps, whole_epoch, loss_target)), eval_s, startup);
  };
  cell.evaluations = static_cast<double>(evaluations_to_target(cell.steps, whole_epoch, loss_target));
  cell.time_to_target_s = ttt_at_steps(cell.steps);
  cell.fit_ttt_s = ttt_at_steps(cell.steps_fit);
  cell.noise_ttt_s = ttt_at_steps(cell.steps_noise);
  set_interval(p.spread, ttt_at_steps, cell);
  cell.device_s = cell.time_to_target_s * g.replicas;
  cell.images_per_s = batch / cell.step_s;
  cell.scaling_efficiency = p.step_time.step_s(1, cell.per_replica_batch) / cell.step_s;
  cell.linear_ttt_s = p.reference_ttt_s * p.reference.replicas / g.replicas;
  cell.throughput_ttt_s = ttt_at_steps(p.reference_epochs * steps_per_epoch);
  return cell;
}

void recommend(Plan& p) {
  for (size_t i = 0; i < p.cells.size(); ++i)
    if (std::isfinite(p.cells[i].time_to_target_s) && !p.cells[i].may_not_train &&
        (!p.fastest || p.cells[i].time_to_target_s < p.cells[*p.fastest].time_to_target_s))
      p.fastest = i;
  if (!p.fastest) return;
  const double limit = (1 + kCheapestWithin) * p.cells[*p.fastest].time_to_target_s;
  for (size_t i = 0; i < p.cells.size(); ++i)
    if (p.cells[i].time_to_target_s <= limit && !p.cells[i].may_not_train &&
        (!p.cheapest || p.cells[i].device_s < p.cells[*p.cheapest].device_s))
      p.cheapest = i;
}

// schedule.scale_rule's spelling in the spec document `spec`; "" when it does not resolve.
std::string scale_rule_of(const json& spec) {
  try {
    return config::name(config::resolve(spec, "spec.json").schedule.scale_rule);
  } catch (const std::exception&) {
    return "";
  }
}

// The seed question at every grid batch B: S(2B) / S(B) by the steps estimate the plan uses.
void answer_doubled_batch(const Calibration& c, const std::vector<const MeasuredRun*>& references,
                          const std::vector<GridCell>& grid, Plan& p) {
  const auto steps_at = [&](double b) { return steps_estimate(p, references, b); };
  std::set<int64_t> batches;
  for (const auto& g : grid) batches.insert(g.global_batch);
  const int64_t lo = p.calibrated_steps.empty() ? 0 : p.calibrated_steps.begin()->first;
  const int64_t hi = p.calibrated_steps.empty() ? 0 : p.calibrated_steps.rbegin()->first;
  for (int64_t b : batches) {
    DoubledBatch d;
    d.batch = b;
    d.steps = steps_at(static_cast<double>(b));
    d.doubled_steps = steps_at(2.0 * static_cast<double>(b));
    d.lr = rule_lr(c.spec, static_cast<double>(b));
    d.doubled_lr = rule_lr(c.spec, 2.0 * static_cast<double>(b));
    d.extrapolated = b < lo || 2 * b > hi;
    p.doubled.push_back(d);
  }
}

void note_steps_gap(Plan& p) {
  double gap = kNaN;
  for (const auto& cell : p.cells)
    if (std::isfinite(cell.steps_fit) && std::isfinite(cell.steps_noise)) {
      const double g = std::abs(cell.steps_noise - cell.steps_fit) / cell.steps_fit;
      gap = std::isfinite(gap) ? std::max(gap, g) : g;
    }
  p.steps_gap = gap;
}
}  // namespace

std::vector<GridCell> parse_grid(const std::vector<std::string>& args) {
  std::vector<int64_t> replicas, batches;
  for (const auto& arg : args) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    if (eq == std::string::npos || (key != "replicas" && key != "batch"))
      throw Error(fmt::format("--grid {}: expected replicas=N,N,... or batch=B,B,... (global batches)", arg));
    (key == "replicas" ? replicas : batches) = parse_values(arg, arg.substr(eq + 1));
  }
  if (replicas.empty() || batches.empty())
    throw Error(fmt::format("--grid: needs both replicas=... and batch=... (got {})", fmt::join(args, " ")));
  std::vector<GridCell> cells;
  for (int64_t n : replicas)
    for (int64_t b : batches) {
      if (b % n != 0) throw Error(fmt::format("--grid: batch {} does not divide by replicas {}", b, n));
      cells.push_back({static_cast<int>(n), b});
    }
  return cells;
}

Plan make_plan(const Calibration& calibration, const std::vector<GridCell>& grid,
               const std::optional<AllReduceProbe>& probe) {
  Plan p;
  p.target = calibration.target;
  p.notes = calibration.notes;
  p.lr_rule = scale_rule_of(calibration.spec);
  for (const auto& r : calibration.runs) p.calibration_runs.push_back(r.dir.string());
  fit_step_time_model(calibration, probe, p);
  std::vector<const MeasuredRun*> references;
  fit_steps_model(calibration, p, references);
  p.spread = spread_of(calibration, p.step_time);
  const Overheads o = overheads_of(calibration);
  p.samples_per_epoch = o.samples_per_epoch;
  set_reference(calibration, p);
  std::set<std::pair<int, int64_t>> measured;  // cells whose time to target a calibration run measured
  for (const auto& r : calibration.runs)
    if (r.time_to_target_s) measured.insert({r.replicas, r.global_batch});
  for (const auto& g : grid) {
    CellPlan cell = predict_cell(p, g, o, references, calibration.target.loss.has_value());
    cell.calibrated = measured.count({g.replicas, g.global_batch}) > 0;
    cell.lr = rule_lr(calibration.spec, static_cast<double>(g.global_batch));
    cell.flags = cell_flags(p, cell, calibration);
    p.cells.push_back(cell);
  }
  std::set<int> counts;
  for (const auto& r : calibration.runs) counts.insert(r.replicas);
  for (int n : counts)
    if (const std::string busy = loaded_timing(calibration, n); !busy.empty())
      p.notes.push_back(fmt::format(
          "step times at {} replica{} were measured on a busy host ({}; over {:.0f}% is load, not the step): the "
          "cells at {} are flagged; calibrate on a quiet host",
          n, n == 1 ? "" : "s", busy, kLoadedTimingPct, n));
  answer_doubled_batch(calibration, references, grid, p);
  note_steps_gap(p);
  recommend(p);
  p.spec = planned_spec(calibration.spec);
  p.created = rundir::utc_now();
  p.hash = seal_of(p.to_json());
  return p;
}

namespace {
// A number as the hash sees it: 6 significant digits, so that the hash does not depend on the
// last bits of a double's printing.
json rounded(double x) {
  if (!std::isfinite(x)) return nullptr;
  return std::stod(fmt::format("{:.6g}", x));
}
}  // namespace

std::optional<int64_t> batch_to_calibrate(const Plan& p, double* disagreement) {
  if (!p.fastest) return std::nullopt;
  const CellPlan& f = p.cells[*p.fastest];
  std::optional<int64_t> best;
  double most = kModelsDisagree;
  for (const auto& c : p.cells) {
    const bool rival = &c == &f || c.ttt_low_s < f.ttt_high_s;
    if (!rival || p.calibrated_steps.count(c.global_batch) || !std::isfinite(c.steps_fit) ||
        !std::isfinite(c.steps_noise))
      continue;
    const double gap = std::abs(c.steps_fit - c.steps_noise) / std::min(c.steps_fit, c.steps_noise);
    if (gap > most) most = gap, best = c.global_batch;
  }
  if (best && disagreement) *disagreement = most;
  return best;
}

json predictions_json(const std::vector<CellPlan>& cells) {
  json out = json::array();
  for (const auto& c : cells)
    out.push_back({{"replicas", c.replicas},
                   {"global_batch", c.global_batch},
                   {"step_s", rounded(c.step_s)},
                   {"steps", rounded(c.steps)},
                   {"time_to_target_s", rounded(c.time_to_target_s)},
                   {"linear_ttt_s", rounded(c.linear_ttt_s)},
                   {"throughput_ttt_s", rounded(c.throughput_ttt_s)}});
  return out;
}

std::string seal_of(json plan_document) {
  plan_document.erase("hash");
  return sha256_hex(plan_document.dump());
}

std::string legacy_predictions_hash(const json& predictions) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char ch : predictions.dump()) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

json planned_spec(const json& spec) {
  if (spec.is_null()) return spec;
  // The seeds by their role (the sweep keys are never in a run's spec); the grid's axes by name.
  json j = config::fields_kept(rundir::effective_spec(config::upgraded_spec(spec)),
                               [](config::FieldRole role) { return role != config::FieldRole::kSeed; });
  j.erase("batch");
  if (j.contains("replicas") && j["replicas"].is_object()) j["replicas"].erase("count");
  return j;
}

}  // namespace ddplab::plan
