#include "ddplab/plan/check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
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
  c.judged = !c.calibrated && c.reached > 0 && c.reached == c.runs && c.ttt_cv <= kJudgeableCv;
}

PredictorScore score(const std::vector<CellCheck>& cells, double CellCheck::* predicted, double CellCheck::* error) {
  PredictorScore s;
  std::vector<double> errors, pred, meas;
  const CellCheck *best_predicted = nullptr, *best_measured = nullptr;
  for (const auto& c : cells) {
    if (!c.judged) continue;
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
  return c;
}
}  // namespace

CheckResult check_plan(const fs::path& plan_file, const std::vector<fs::path>& run_dirs) {
  const json plan = read_plan(plan_file);
  CheckResult result;
  result.plan_hash = plan.value("hash", "");
  result.hash_matches = hash_of(plan["predictions"]) == result.plan_hash;
  const Target target = Target::from_json(plan["target"]);
  result.target_text = target.describe();
  std::map<std::pair<int, int64_t>, std::vector<const MeasuredRun*>> by_cell;
  std::vector<MeasuredRun> measured;
  std::vector<rundir::RunData> loaded;
  for (const auto& dir : rundir::find_run_dirs(run_dirs)) loaded.push_back(rundir::read_run(dir, result.notes));
  for (const auto& r : loaded) measured.push_back(measure_run(r, target));
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
      "error | TTT s meas. / pred. | error | CV | linear err. | throughput err. | judged |\n"
      "|---:|---:|---|---|---|---:|---|---:|---|---:|---:|---:|---:|---|\n";
  for (const auto& c : r.cells) {
    const char* judged = c.calibrated ? "calibrated" : c.judged ? "yes" : "cannot be judged";
    out += fmt::format("| {} | {} | {} | {} ({}) | {} / {} | {} | {} / {} | {} | {} / {} | {} | {} | {} | {} | {} |\n",
                       c.replicas, c.global_batch, c.calibrated ? "no" : "yes", c.runs, c.reached, num(1e3 * c.step_s),
                       num(1e3 * c.predicted_step_s), pct(c.step_error), num(c.steps, 0), num(c.predicted_steps, 0),
                       pct(c.steps_error), num(c.ttt_s, 1), num(c.predicted_ttt_s, 1), pct(c.ttt_error),
                       pct(c.ttt_cv).substr(1), pct(c.linear_error), pct(c.throughput_error), judged);
  }
  return out;
}

std::string score_row(const char* name, const PredictorScore& s, int judged) {
  return fmt::format("| {} | {} | {} of {} | {} | {} |\n", name, pct(s.mean_abs_error).substr(1), s.within_tolerance,
                     judged, num(s.spearman), num(s.regret, 3));
}

json score_json(const PredictorScore& s) {
  const auto n = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  return {{"mean_abs_error", n(s.mean_abs_error)},
          {"spearman", n(s.spearman)},
          {"regret", n(s.regret)},
          {"within_tolerance", s.within_tolerance}};
}
}  // namespace

std::string render_check_markdown(const CheckResult& r) {
  std::string out = fmt::format("# Plan check: time to {}\n\nPlan hash `{}` ({}).\n\n", r.target_text, r.plan_hash,
                                r.hash_matches ? "matches its predictions" : "does NOT match its predictions: edited?");
  out += fmt::format(
      "Held-out cells judged: {} ({} cannot be judged: a run missed the target or the seed-to-seed CV of time "
      "to target is above {:.0f}%).\n\n",
      r.judged, r.cannot_judge, 100 * kJudgeableCv);
  out += "| predictor | mean abs. TTT error | within 15% | Spearman rho | regret |\n|---|---:|---:|---:|---:|\n";
  out += score_row("planner", r.planner, r.judged) + score_row("linear speedup", r.linear, r.judged) +
         score_row("throughput only", r.throughput, r.judged);
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
                     {"judged", c.judged}});
  const json j = {{"plan_hash", r.plan_hash},
                  {"hash_matches", r.hash_matches},
                  {"target", r.target_text},
                  {"judged", r.judged},
                  {"cannot_judge", r.cannot_judge},
                  {"planner", score_json(r.planner)},
                  {"linear", score_json(r.linear)},
                  {"throughput", score_json(r.throughput)},
                  {"cells", cells},
                  {"notes", r.notes}};
  const fs::path json_file = out_dir / "check.json", md_file = out_dir / "check.md";
  rundir::write_file_atomic(json_file, j.dump(2) + "\n");
  rundir::write_file_atomic(md_file, render_check_markdown(r));
  return {json_file, md_file};
}

}  // namespace ddplab::plan
