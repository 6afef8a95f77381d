#include "ddplab/plan/check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/config/sweep.h"
#include "ddplab/plan/calibration.h"
#include "ddplab/plan/fit.h"
#include "ddplab/plan/plan.h"
#include "ddplab/report/stats.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/rundir/run_reader.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double number_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : kNaN;
}

double relative_error(double predicted, double measured) {
  return std::isfinite(predicted) && std::isfinite(measured) && measured > 0 ? predicted / measured - 1 : kNaN;
}

json read_plan(const fs::path& file) {
  const json plan = rundir::read_json(file);
  if (!plan.is_object() || !plan.contains("predictions") || !plan["predictions"].is_array() ||
      !plan.contains("cells") || !plan["cells"].is_array() || !plan.contains("target"))
    throw Error(
        fmt::format("{}: not a plan.json of ddplab plan (predictions, cells and target expected)", file.string()));
  return plan;
}

void measure_cell(const std::vector<const MeasuredRun*>& runs, CellCheck& c) {
  std::vector<double> step, steps, ttt;
  for (const MeasuredRun* r : runs) {
    ++c.runs;
    if (r->timed) step.push_back(r->timing.step_s);
    if (!r->left_out.empty() || !r->time_to_target_s) continue;
    ++c.reached;
    steps.push_back(*r->steps_to_target);
    ttt.push_back(*r->time_to_target_s);
  }
  c.step_s = report::mean(step);
  c.steps = report::mean(steps);
  c.ttt_s = report::mean(ttt);
  c.ttt_cv = ttt.size() >= 2 ? report::sample_std(ttt) / c.ttt_s : 0.0;
  c.step_error = relative_error(c.predicted_step_s, c.step_s);
  c.steps_error = relative_error(c.predicted_steps, c.steps);
  c.ttt_error = relative_error(c.predicted_ttt_s, c.ttt_s);
  c.linear_error = relative_error(c.linear_ttt_s, c.ttt_s);
  c.throughput_error = relative_error(c.throughput_ttt_s, c.ttt_s);
  c.fit_error = relative_error(c.fit_ttt_s, c.ttt_s);
  c.noise_error = relative_error(c.noise_ttt_s, c.ttt_s);
  c.scorable = !c.calibrated && c.reached > 0 && c.reached == c.runs;
  c.judged = c.scorable && c.ttt_cv <= kJudgeableCv;
  c.covered = c.ttt_s >= c.ttt_low_s && c.ttt_s <= c.ttt_high_s;
}

Coverage coverage(const std::vector<CellCheck>& cells, bool CellCheck::* counted) {
  Coverage out;
  for (const auto& c : cells)
    if (c.*counted && std::isfinite(c.ttt_low_s)) {
      ++out.cells;
      out.covered += c.covered ? 1 : 0;
    }
  return out;
}

PredictorScore score(const std::vector<CellCheck>& cells, double CellCheck::* predicted, double CellCheck::* error,
                     bool CellCheck::* counted = &CellCheck::judged) {
  PredictorScore s;
  std::vector<double> errors, pred, meas;
  const CellCheck *best_predicted = nullptr, *best_measured = nullptr;
  for (const auto& c : cells) {
    if (!(c.*counted) || !std::isfinite(c.*predicted)) continue;
    ++s.cells;
    errors.push_back(std::abs(c.*error));
    if (std::abs(c.*error) <= kErrorTolerance) ++s.within_tolerance;
    pred.push_back(c.*predicted);
    meas.push_back(c.ttt_s);
    if (!best_predicted || c.*predicted < best_predicted->*predicted) best_predicted = &c;
    if (!best_measured || c.ttt_s < best_measured->ttt_s) best_measured = &c;
  }
  s.mean_abs_error = report::mean(errors);
  s.spearman = spearman(pred, meas);
  s.regret = best_measured ? best_predicted->ttt_s / best_measured->ttt_s : kNaN;
  return s;
}

// Why `run` cannot be scored as held out for `plan` (check.h); empty when it can.
std::string refusal(const json& plan, const rundir::RunData& run) {
  const auto created = rundir::manifest_time(plan, "created");
  const auto start = rundir::manifest_time(run.manifest, "start");
  if (!start) return "its manifest has no start time, so it cannot show that it came after the plan";
  if (created && *start < *created)
    return fmt::format("started {} s before the plan was written ({}): not held out", std::lround(*created - *start),
                       plan.value("created", ""));
  if (!plan.contains("spec") || plan["spec"].is_null()) return "";
  const auto changes = config::resolved_differences(plan["spec"], planned_spec(run.spec));
  if (changes.empty()) return "";
  return fmt::format("its spec differs from the plan's other than in replicas, batch and seed: {}",
                     fmt::join(changes, "; "));
}

CellCheck planned_cell(const json& p) {
  CellCheck c;
  c.replicas = p.value("replicas", 1);
  c.global_batch = p.value("global_batch", int64_t{0});
  c.calibrated = p.value("calibrated", false);
  c.predicted_step_s = number_of(p, "step_s");
  c.predicted_steps = number_of(p, "steps");
  c.predicted_ttt_s = number_of(p, "time_to_target_s");
  c.linear_ttt_s = number_of(p, "linear_ttt_s");
  c.throughput_ttt_s = number_of(p, "throughput_ttt_s");
  c.fit_ttt_s = number_of(p, "fit_ttt_s");
  c.noise_ttt_s = number_of(p, "noise_ttt_s");
  c.ttt_low_s = number_of(p, "ttt_low_s");
  c.ttt_high_s = number_of(p, "ttt_high_s");
  return c;
}
}  // namespace

CheckResult check_plan(const fs::path& plan_file, const std::vector<fs::path>& run_dirs) {
  const json plan = read_plan(plan_file);
  CheckResult result;
  result.plan_hash = plan.value("hash", "");
  result.plan_created = plan.value("created", "");
  result.sealed = plan.contains("spec");
  result.hash_matches =
      (result.sealed ? seal_of(plan) : legacy_predictions_hash(plan["predictions"])) == result.plan_hash;
  const Target target = Target::from_json(plan["target"]);
  result.target_text = target.describe();
  std::map<std::pair<int, int64_t>, std::vector<const MeasuredRun*>> by_cell;
  std::vector<MeasuredRun> measured;
  std::vector<rundir::RunData> loaded;
  for (const auto& dir : rundir::find_run_dirs(run_dirs)) loaded.push_back(rundir::read_run(dir, result.notes));
  for (const auto& r : loaded) {
    if (const std::string why = refusal(plan, r); !why.empty())
      result.refused.push_back(fmt::format("{}: {}", r.dir.string(), why));
    else
      measured.push_back(measure_run(r, target));
  }
  for (const auto& m : measured) {
    by_cell[{m.replicas, m.global_batch}].push_back(&m);
    if (!m.left_out.empty()) result.notes.push_back(fmt::format("{}: {}", m.dir.string(), m.left_out));
  }
  for (const auto& p : plan["cells"]) {
    CellCheck c = planned_cell(p);
    const auto it = by_cell.find({c.replicas, c.global_batch});
    if (it == by_cell.end()) continue;
    measure_cell(it->second, c);
    by_cell.erase(it);
    if (!c.calibrated) (c.judged ? result.judged : result.cannot_judge) += 1;
    result.cells.push_back(c);
  }
  for (const auto& [cell, runs] : by_cell)
    result.notes.push_back(fmt::format("{} run{} at {} x global batch {}: not a cell of the plan", runs.size(),
                                       runs.size() == 1 ? "" : "s", cell.first, cell.second));
  result.planner = score(result.cells, &CellCheck::predicted_ttt_s, &CellCheck::ttt_error);
  result.linear = score(result.cells, &CellCheck::linear_ttt_s, &CellCheck::linear_error);
  result.throughput = score(result.cells, &CellCheck::throughput_ttt_s, &CellCheck::throughput_error);
  result.fit_only = score(result.cells, &CellCheck::fit_ttt_s, &CellCheck::fit_error);
  result.noise_only = score(result.cells, &CellCheck::noise_ttt_s, &CellCheck::noise_error);
  result.planner_unfiltered =
      score(result.cells, &CellCheck::predicted_ttt_s, &CellCheck::ttt_error, &CellCheck::scorable);
  result.coverage = coverage(result.cells, &CellCheck::judged);
  result.coverage_unfiltered = coverage(result.cells, &CellCheck::scorable);
  return result;
}

namespace {
std::string pct(double x) { return std::isfinite(x) ? fmt::format("{:+.1f}%", 100 * x) : std::string("-"); }
std::string num(double x, int digits = 2) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, digits) : std::string("-");
}

std::string cells_table(const CheckResult& r) {
  std::string out =
      "| replicas | global batch | held out | runs (reached) | step ms meas. / pred. | error | steps meas. / pred. | "
      "error | TTT s meas. / pred. | error | 80% interval (s) | in it | CV | fit alone err. | noise alone err. | "
      "linear err. | throughput err. | judged |\n"
      "|---:|---:|---|---|---|---:|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const auto& c : r.cells) {
    const char* judged = c.calibrated ? "calibrated" : c.judged ? "yes" : "cannot be judged";
    out += fmt::format(
        "| {} | {} | {} | {} ({}) | {} / {} | {} | {} / {} | {} | {} / {} | {} | {} to {} | {} | {} | {} | {} | {} | "
        "{} "
        "| {} |\n",
        c.replicas, c.global_batch, c.calibrated ? "no" : "yes", c.runs, c.reached, num(1e3 * c.step_s),
        num(1e3 * c.predicted_step_s), pct(c.step_error), num(c.steps, 0), num(c.predicted_steps, 0),
        pct(c.steps_error), num(c.ttt_s, 1), num(c.predicted_ttt_s, 1), pct(c.ttt_error), num(c.ttt_low_s, 1),
        num(c.ttt_high_s, 1), std::isfinite(c.ttt_low_s) && c.reached > 0 ? (c.covered ? "yes" : "no") : "-",
        pct(c.ttt_cv).substr(1), pct(c.fit_error), pct(c.noise_error), pct(c.linear_error), pct(c.throughput_error),
        judged);
  }
  return out;
}

std::string seal_line(const CheckResult& r) {
  if (!r.sealed)
    return fmt::format(
        "Plan hash `{}` ({}; a plan of an older ddplab: the hash covers its predictions only, not its "
        "cells' calibrated flags, its creation time or its spec, which are not checked).",
        r.plan_hash, r.hash_matches ? "matches its predictions" : "does NOT match its predictions: edited?");
  return fmt::format(
      "Plan sealed {}, SHA-256 `{}`: {}.", r.plan_created, r.plan_hash,
      r.hash_matches ? "matches plan.json" : "does NOT match plan.json: **edited after it was written**");
}

std::string score_row(const char* name, const PredictorScore& s) {
  return fmt::format("| {} | {} | {} | {} of {} | {} | {} |\n", name, s.cells, pct(s.mean_abs_error).substr(1),
                     s.within_tolerance, s.cells, num(s.spearman), num(s.regret, 3));
}

std::string coverage_text(const Coverage& c) {
  if (c.cells == 0) return "no cell with an interval";
  return fmt::format("{} of {} ({:.0f}%)", c.covered, c.cells, 100.0 * c.covered / c.cells);
}

json score_json(const PredictorScore& s) {
  const auto n = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  return {{"mean_abs_error", n(s.mean_abs_error)},
          {"spearman", n(s.spearman)},
          {"regret", n(s.regret)},
          {"within_tolerance", s.within_tolerance},
          {"cells", s.cells}};
}
}  // namespace

std::string render_check_markdown(const CheckResult& r) {
  std::string out = fmt::format("# Plan check: time to {}\n\n{}\n\n", r.target_text, seal_line(r));
  if (!r.refused.empty())
    out += fmt::format(
        "**{} run{} refused, not scored** (a plan is scored only on runs made after it, of its spec):\n\n- {}\n\n",
        r.refused.size(), r.refused.size() == 1 ? "" : "s", fmt::join(r.refused, "\n- "));
  out += fmt::format(
      "Held-out cells judged: {} ({} cannot be judged: a run missed the target or the seed-to-seed CV of time "
      "to target is above {:.0f}%).\n\n",
      r.judged, r.cannot_judge, 100 * kJudgeableCv);
  out +=
      "| predictor | cells | mean abs. TTT error | within 15% | Spearman rho | regret "
      "|\n|---|---:|---:|---:|---:|---:|\n";
  out += score_row("planner", r.planner) + score_row("McCandlish fit alone", r.fit_only) +
         score_row("noise scale alone", r.noise_only) + score_row("linear speedup", r.linear) +
         score_row("throughput only", r.throughput) +
         score_row("planner, no CV filter (every held-out cell reached by all its runs)", r.planner_unfiltered);
  out += fmt::format(
      "\nThe 80% intervals held the measured mean time to target in {} (judged cells) and {} (no CV "
      "filter); an interval is for one run, so a mean of several runs should fall inside more often "
      "than 80%.\n",
      coverage_text(r.coverage), coverage_text(r.coverage_unfiltered));
  out += "\n## Cells\n\nErrors are predicted / measured - 1.\n\n" + cells_table(r);
  if (!r.notes.empty()) out += fmt::format("\n## Notes\n\n- {}\n", fmt::join(r.notes, "\n- "));
  return out;
}

std::vector<fs::path> write_check(const CheckResult& r, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  json cells = json::array();
  const auto n = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  for (const auto& c : r.cells)
    cells.push_back({{"replicas", c.replicas},
                     {"global_batch", c.global_batch},
                     {"calibrated", c.calibrated},
                     {"runs", c.runs},
                     {"reached", c.reached},
                     {"step_s", n(c.step_s)},
                     {"steps", n(c.steps)},
                     {"ttt_s", n(c.ttt_s)},
                     {"ttt_cv", n(c.ttt_cv)},
                     {"step_error", n(c.step_error)},
                     {"steps_error", n(c.steps_error)},
                     {"ttt_error", n(c.ttt_error)},
                     {"linear_error", n(c.linear_error)},
                     {"throughput_error", n(c.throughput_error)},
                     {"fit_error", n(c.fit_error)},
                     {"noise_error", n(c.noise_error)},
                     {"ttt_low_s", n(c.ttt_low_s)},
                     {"ttt_high_s", n(c.ttt_high_s)},
                     {"covered", c.covered},
                     {"scorable", c.scorable},
                     {"judged", c.judged}});
  const json j = {
      {"plan_hash", r.plan_hash},
      {"hash_matches", r.hash_matches},
      {"sealed", r.sealed},
      {"plan_created", r.plan_created},
      {"refused", r.refused},
      {"target", r.target_text},
      {"judged", r.judged},
      {"cannot_judge", r.cannot_judge},
      {"planner", score_json(r.planner)},
      {"linear", score_json(r.linear)},
      {"throughput", score_json(r.throughput)},
      {"fit_only", score_json(r.fit_only)},
      {"noise_only", score_json(r.noise_only)},
      {"planner_no_cv_filter", score_json(r.planner_unfiltered)},
      {"coverage", {{"covered", r.coverage.covered}, {"cells", r.coverage.cells}}},
      {"coverage_no_cv_filter", {{"covered", r.coverage_unfiltered.covered}, {"cells", r.coverage_unfiltered.cells}}},
      {"cells", cells},
      {"notes", r.notes}};
  const fs::path json_file = out_dir / "check.json", md_file = out_dir / "check.md";
  rundir::write_file_atomic(json_file, j.dump(2) + "\n");
  rundir::write_file_atomic(md_file, render_check_markdown(r));
  return {json_file, md_file};
}

}  // namespace ddplab::plan
