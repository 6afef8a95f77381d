// plan.json and plan.md (plan.h).
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/plan/plan.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
json number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json step_time_json(const StepTimeModel& m) {
  json compute = json::object();
  for (const auto& [n, f] : m.compute) compute[fmt::format("{}", n)] = {{"alpha_s", f.alpha}, {"beta_s", f.beta}};
  return {{"compute", compute},
          {"payload_bytes", m.payload_bytes},
          {"buckets", m.buckets},
          {"bandwidth_bytes_per_s", m.seconds_per_byte > 0 ? json(1 / m.seconds_per_byte) : json(nullptr)},
          {"latency_s", m.latency_s},
          {"latency_fitted", m.latency_fitted},
          {"overlap_g", m.overlap},
          {"log_rms", number(m.log_rms)}};
}

json steps_json(const Plan& p) {
  json calibrated = json::object();
  for (const auto& [b, s] : p.calibrated_steps) calibrated[fmt::format("{}", b)] = s;
  json j = {{"source", p.steps_source},
            {"calibrated_steps", calibrated},
            {"fit_refusal", p.steps_fit_refusal},
            {"noise_reference_runs", p.noise_reference_runs},
            {"largest_gap", number(p.steps_gap)}};
  if (p.steps_fit) j["fit"] = {{"s_min", p.steps_fit->s_min}, {"b_crit", p.steps_fit->b_crit}};
  return j;
}

json cell_json(const CellPlan& c) {
  return {{"replicas", c.replicas},
          {"global_batch", c.global_batch},
          {"per_replica_batch", c.per_replica_batch},
          {"step_s", number(c.step_s)},
          {"steps", number(c.steps)},
          {"steps_fit", number(c.steps_fit)},
          {"steps_noise", number(c.steps_noise)},
          {"evaluations", number(c.evaluations)},
          {"time_to_target_s", number(c.time_to_target_s)},
          {"device_s", number(c.device_s)},
          {"images_per_s", number(c.images_per_s)},
          {"scaling_efficiency", number(c.scaling_efficiency)},
          {"linear_ttt_s", number(c.linear_ttt_s)},
          {"throughput_ttt_s", number(c.throughput_ttt_s)},
          {"calibrated", c.calibrated},
          {"flags", c.flags}};
}

std::string cell_name(const CellPlan& c) { return fmt::format("{} x {}", c.replicas, c.per_replica_batch); }

std::string recommendation_lines(const Plan& p) {
  if (!p.fastest) return "No cell has a finite predicted time to the target.\n";
  const CellPlan &f = p.cells[*p.fastest], &c = p.cells[*p.cheapest];
  return fmt::format(
      "- **Fastest**: {} replica(s) at global batch {} ({}), {:.1f} s to the target.\n"
      "- **Cheapest within {:.0f}% of it**: {} replica(s) at global batch {} ({}), {:.1f} s, {:.1f} device-seconds.\n",
      f.replicas, f.global_batch, cell_name(f), f.time_to_target_s, 100 * kCheapestWithin, c.replicas, c.global_batch,
      cell_name(c), c.time_to_target_s, c.device_s);
}

std::string models_lines(const Plan& p) {
  std::string out;
  const StepTimeModel& m = p.step_time;
  for (const auto& [n, f] : m.compute)
    out += fmt::format("- T_comp at {} replica{}: {:.4g} s + {:.4g} s x b\n", n, n == 1 ? "" : "s", f.alpha, f.beta);
  if (m.seconds_per_byte > 0)
    out += fmt::format(
        "- T_comm: {:.3g} MB payload, {} bucket{}, bandwidth {:.3g} MB/s, latency {:.3g} ms{}; overlap g = {:.2f}\n",
        m.payload_bytes / 1e6, m.buckets, m.buckets == 1 ? "" : "s", 1e-6 / m.seconds_per_byte, 1e3 * m.latency_s,
        m.latency_fitted ? "" : " (not separable: set to 0)", m.overlap);
  out += fmt::format("- step-time fit: rms log error {:.3f} over the calibration's runs\n", m.log_rms);
  if (p.steps_fit)
    out += fmt::format("- S(B) = {:.0f} (1 + {:.0f} / B) (McCandlish), fitted on {} global batches\n",
                       p.steps_fit->s_min, p.steps_fit->b_crit, p.calibrated_steps.size());
  else
    out += fmt::format("- no McCandlish fit: {}\n", p.steps_fit_refusal);
  out += fmt::format("- steps used: **{}**; noise-scale estimate from {} run{}", p.steps_source, p.noise_reference_runs,
                     p.noise_reference_runs == 1 ? "" : "s");
  out += std::isfinite(p.steps_gap)
             ? fmt::format("; the two estimates differ by up to {:.0f}% over the grid\n", 100 * p.steps_gap)
             : "; only one estimate available\n";
  return out;
}

std::string step_fit_table(const Plan& p) {
  std::string out =
      "| run | replicas | per replica | step ms measured / fitted | comm_wait ms / fitted exposed |\n"
      "|---|---:|---:|---|---|\n";
  for (const auto& r : p.step_fit)
    out += fmt::format("| {} | {} | {:.0f} | {:.2f} / {:.2f} | {:.2f} / {:.2f} |\n", r.run, r.replicas,
                       r.per_replica_batch, 1e3 * r.step_s, 1e3 * r.fitted_step_s, 1e3 * r.comm_wait_s,
                       1e3 * r.fitted_exposed_s);
  return out;
}

json step_fit_json(const Plan& p) {
  json rows = json::array();
  for (const auto& r : p.step_fit)
    rows.push_back({{"run", r.run},
                    {"replicas", r.replicas},
                    {"per_replica_batch", r.per_replica_batch},
                    {"step_s", number(r.step_s)},
                    {"fitted_step_s", number(r.fitted_step_s)},
                    {"comm_wait_s", number(r.comm_wait_s)},
                    {"fitted_exposed_s", number(r.fitted_exposed_s)}});
  return rows;
}

std::string cells_table(const Plan& p) {
  std::string out =
      "| replicas | global batch | per replica | step (ms) | steps | steps (fit / noise) | time to target (s) | "
      "device-s | images/s | scaling eff. | linear baseline (s) | throughput baseline (s) | flags |\n"
      "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n";
  const auto num = [](double x, const char* f) {
    return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : std::string("-");
  };
  for (const auto& c : p.cells) {
    std::vector<std::string> flags = c.flags;
    if (c.calibrated) flags.insert(flags.begin(), "calibrated (not held out)");
    out += fmt::format("| {} | {} | {:.0f} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} |\n", c.replicas,
                       c.global_batch, c.per_replica_batch, num(1e3 * c.step_s, "{:.2f}"), num(c.steps, "{:.0f}"),
                       num(c.steps_fit, "{:.0f}"), num(c.steps_noise, "{:.0f}"), num(c.time_to_target_s, "{:.1f}"),
                       num(c.device_s, "{:.1f}"), num(c.images_per_s, "{:.0f}"), num(c.scaling_efficiency, "{:.2f}"),
                       num(c.linear_ttt_s, "{:.1f}"), num(c.throughput_ttt_s, "{:.1f}"), fmt::join(flags, "; "));
  }
  return out;
}
}  // namespace

json Plan::to_json() const {
  json cells_out = json::array();
  for (const auto& c : cells) cells_out.push_back(cell_json(c));
  json j = {{"target", target.to_json()},
            {"target_text", target.describe()},
            {"hash", hash},
            {"predictions", predictions_json(cells)},
            {"cells", cells_out},
            {"step_time", step_time_json(step_time)},
            {"step_fit", step_fit_json(*this)},
            {"steps", steps_json(*this)},
            {"reference",
             {{"replicas", reference.replicas},
              {"global_batch", reference.global_batch},
              {"time_to_target_s", reference_ttt_s},
              {"epochs", reference_epochs}}},
            {"samples_per_epoch", samples_per_epoch},
            {"notes", notes},
            {"calibration_runs", calibration_runs},
            {"created", rundir::utc_now()}};
  j["fastest"] = fastest ? json(*fastest) : json(nullptr);
  j["cheapest"] = cheapest ? json(*cheapest) : json(nullptr);
  return j;
}

std::string render_plan_markdown(const Plan& p) {
  std::string out = fmt::format("# Plan: time to {}\n\nPredictions hash `{}` (ddplab plan --check shows it).\n\n",
                                p.target.describe(), p.hash);
  out += "## Recommendation\n\n" + recommendation_lines(p) + "\n## Predictions\n\n" + cells_table(p);
  out += "\n## Models\n\n" + models_lines(p);
  out +=
      "\nStep time on the calibration runs (medians over epochs), measured and as the fitted model gives it back:\n\n" +
      step_fit_table(p);
  out += fmt::format(
      "\nBaselines: linear speedup from {} x {} ({:.1f} s; T ~ 1/N, S ~ 1/B, so the same epochs), "
      "and throughput only ({:.2f} epochs at each cell's predicted images/s).\n",
      p.reference.replicas, p.reference.global_batch, p.reference_ttt_s, p.reference_epochs);
  if (!p.notes.empty()) out += fmt::format("\n## Notes\n\n- {}\n", fmt::join(p.notes, "\n- "));
  out += fmt::format("\n## Calibration runs\n\n- {}\n", fmt::join(p.calibration_runs, "\n- "));
  return out;
}

std::vector<fs::path> write_plan(const Plan& plan, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  const fs::path json_file = out_dir / "plan.json", md_file = out_dir / "plan.md";
  rundir::write_file_atomic(json_file, plan.to_json().dump(2) + "\n");
  rundir::write_file_atomic(md_file, render_plan_markdown(plan));
  return {json_file, md_file};
}

}  // namespace ddplab::plan
