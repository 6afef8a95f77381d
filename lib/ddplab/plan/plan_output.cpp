// plan.json, plan.md, plan.html and the chart (plan.h). plan.md and plan.html say the same: both are
// rendered from one list of sections (paragraphs, bullet lists, tables and the chart).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/config/lr_rule.h"
#include "ddplab/plan/plan.h"
#include "ddplab/report/page.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;
using report::Table;

namespace {
constexpr const char* kChartFile = "plan_ttt.svg";

json number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string num(double x, const char* f) { return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : "-"; }

std::string comm_source(const StepTimeModel& m) {
  return m.comm_measured ? "all-reduce probe" : "fitted from the calibration's step times";
}

json step_time_json(const StepTimeModel& m) {
  json compute = json::object();
  for (const auto& [n, curve] : m.compute) {
    json points = json::array();  // [per-replica batch, seconds]
    for (const auto& [b, t] : curve.points) points.push_back({b, t});
    compute[fmt::format("{}", n)] = {{"points", points}};
  }
  return {{"compute", compute},
          {"payload_bytes", m.payload_bytes},
          {"buckets", m.buckets},
          {"bandwidth_bytes_per_s", m.seconds_per_byte > 0 ? json(1 / m.seconds_per_byte) : json(nullptr)},
          {"latency_s", m.latency_s},
          {"latency_fitted", m.latency_fitted},
          {"comm_source", comm_source(m)},
          {"overlap_g", m.overlap},
          {"log_rms", number(m.log_rms)}};
}

json steps_json(const Plan& p) {
  json calibrated = json::object(), lrs = json::object();
  for (const auto& [b, s] : p.calibrated_steps) calibrated[fmt::format("{}", b)] = s;
  for (const auto& [b, lr] : p.calibrated_lrs) lrs[fmt::format("{}", b)] = number(lr);
  json j = {{"source", p.steps_source},
            {"calibrated_steps", calibrated},
            {"calibrated_lrs", lrs},
            {"lr_rule", p.lr_rule},
            {"fit_refusal", p.steps_fit_refusal},
            {"noise_reference_runs", p.noise_reference_runs},
            {"largest_gap", number(p.steps_gap)}};
  if (p.steps_fit) j["fit"] = {{"s_min", p.steps_fit->s_min}, {"b_crit", p.steps_fit->b_crit}};
  return j;
}

json doubled_json(const Plan& p) {
  json rows = json::array();
  for (const auto& d : p.doubled)
    rows.push_back({{"batch", d.batch},
                    {"steps", number(d.steps)},
                    {"doubled_steps", number(d.doubled_steps)},
                    {"ratio", number(d.ratio())},
                    {"lr", number(d.lr)},
                    {"doubled_lr", number(d.doubled_lr)},
                    {"suggested_doubled_lr", number(d.lr / d.ratio())},
                    {"extrapolated", d.extrapolated}});
  return rows;
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
          {"ttt_low_s", number(c.ttt_low_s)},
          {"ttt_high_s", number(c.ttt_high_s)},
          {"fit_ttt_s", number(c.fit_ttt_s)},
          {"noise_ttt_s", number(c.noise_ttt_s)},
          {"lr", number(c.lr)},
          {"calibrated", c.calibrated},
          {"flags", c.flags}};
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

// One block of a section: a paragraph, a bullet list, a table or the chart.
struct Block {
  enum class Kind { kParagraph, kList, kTable, kChart } kind = Kind::kParagraph;
  std::vector<std::string> lines;  // a paragraph's sentences, a list's items
  Table table;
};
struct Section {
  std::string heading;  // "" for the introduction
  std::vector<Block> blocks;
};
Block paragraph(std::string text) { return {Block::Kind::kParagraph, {std::move(text)}, {}}; }
Block bullets(std::vector<std::string> items) { return {Block::Kind::kList, std::move(items), {}}; }
Block table(Table t) { return {Block::Kind::kTable, {}, std::move(t)}; }

std::string cell_name(const CellPlan& c) { return fmt::format("{} x {}", c.replicas, c.per_replica_batch); }

std::string interval_text(const CellPlan& c) {
  return fmt::format("{} to {}", num(c.ttt_low_s, "{:.1f}"), num(c.ttt_high_s, "{:.1f}"));
}

// How sure the choice of the fastest is: the cells whose interval reaches below the fastest's upper
// end could be faster.
std::string sureness_line(const Plan& p, const CellPlan& f) {
  std::vector<std::string> rivals;
  for (const auto& c : p.cells)
    if (&c != &f && c.ttt_low_s < f.ttt_high_s) rivals.push_back(fmt::format("{} x {}", c.replicas, c.global_batch));
  const std::string seeds =
      std::isfinite(p.spread.seed_cv)
          ? fmt::format("seed-to-seed CV of steps {:.1f}% over {} batch{}", 100 * p.spread.seed_cv,
                        p.spread.seed_batches, p.spread.seed_batches == 1 ? "" : "es")
          : std::string(
                "no seed part: the calibration ran one seed a batch, so the interval holds the models' "
                "disagreement and the step-time residual only");
  return fmt::format(
      "How sure: 80% interval {} s ({}; step-time residual {:.1f}%). {}", interval_text(f), seeds,
      100 * p.spread.step_log_rms,
      rivals.empty()
          ? std::string("No other cell's interval reaches below its upper end: the choice is clear.")
          : fmt::format("Not separated from {} (their intervals reach below its upper end).", fmt::join(rivals, ", ")));
}

std::vector<std::string> recommendation_lines(const Plan& p) {
  if (!p.fastest) return {"No cell has a finite predicted time to the target."};
  const CellPlan &f = p.cells[*p.fastest], &c = p.cells[*p.cheapest];
  return {fmt::format("Fastest: {} replica(s) at global batch {} ({}), {:.1f} s to the target.", f.replicas,
                      f.global_batch, cell_name(f), f.time_to_target_s),
          sureness_line(p, f),
          fmt::format("Cheapest within {:.0f}% of it: {} replica(s) at global batch {} ({}), {:.1f} s, {:.1f} "
                      "device-seconds.",
                      100 * kCheapestWithin, c.replicas, c.global_batch, cell_name(c), c.time_to_target_s, c.device_s)};
}

std::string comm_line(const Plan& p) {
  const StepTimeModel& m = p.step_time;
  std::string line = fmt::format("T_comm: {:.3g} MB payload, {} bucket{}, bandwidth {:.3g} MB/s, latency {:.3g} ms",
                                 m.payload_bytes / 1e6, m.buckets, m.buckets == 1 ? "" : "s", 1e-6 / m.seconds_per_byte,
                                 1e3 * m.latency_s);
  if (m.comm_measured && p.probe) {
    std::set<int> counts;
    for (const auto& pt : p.probe->points) counts.insert(pt.replicas);
    line +=
        fmt::format(", measured by the all-reduce probe ({}: {} on {}, {} replicas, median of {} per size)",
                    p.probe->file, p.probe->backend, p.probe->device, fmt::join(counts, ", "), p.probe->repetitions);
    if (p.step_time_fitted && p.step_time_fitted->seconds_per_byte > 0)
      line += fmt::format(
          "; fitted from the step times instead: bandwidth {:.3g} MB/s, latency {:.3g} ms{} (rms log "
          "error {:.3f})",
          1e-6 / p.step_time_fitted->seconds_per_byte, 1e3 * p.step_time_fitted->latency_s,
          p.step_time_fitted->latency_fitted ? "" : " (not separable: set to 0)", p.step_time_fitted->log_rms);
  } else {
    line += fmt::format(", fitted from the step times{}", m.latency_fitted ? "" : " (not separable: latency set to 0)");
  }
  return line + fmt::format("; overlap g = {:.2f}", m.overlap);
}

std::vector<std::string> models_lines(const Plan& p) {
  std::vector<std::string> out;
  const StepTimeModel& m = p.step_time;
  for (const auto& [n, curve] : m.compute) {
    std::vector<std::string> points;
    for (const auto& [b, t] : curve.points) points.push_back(fmt::format("{:g}: {:.4g} ms", b, 1000 * t));
    out.push_back(
        fmt::format("T_comp at {} replica{} (per-replica batch: ms per step; linear between, the end "
                    "segments beyond): {}",
                    n, n == 1 ? "" : "s", fmt::join(points, ", ")));
  }
  if (m.seconds_per_byte > 0) out.push_back(comm_line(p));
  out.push_back(fmt::format("step-time fit: rms log error {:.3f} over the calibration's runs", m.log_rms));
  if (p.steps_fit)
    out.push_back(fmt::format("S(B) = {:.0f} (1 + {:.0f} / B) (McCandlish), fitted on {} global batches",
                              p.steps_fit->s_min, p.steps_fit->b_crit, p.calibrated_steps.size()));
  else
    out.push_back(fmt::format("no McCandlish fit: {}", p.steps_fit_refusal));
  out.push_back(
      fmt::format("steps used: {}; noise-scale estimate from {} run{}{}", p.steps_source, p.noise_reference_runs,
                  p.noise_reference_runs == 1 ? "" : "s",
                  std::isfinite(p.steps_gap)
                      ? fmt::format("; the two estimates differ by up to {:.0f}% over the grid", 100 * p.steps_gap)
                      : "; only one estimate available"));
  return out;
}

Table step_fit_table(const Plan& p) {
  Table t{{"run", "replicas", "per replica", "step ms measured / fitted", "comm_wait ms / fitted exposed"}};
  for (const auto& r : p.step_fit)
    t.push_back({r.run, fmt::format("{}", r.replicas), fmt::format("{:.0f}", r.per_replica_batch),
                 fmt::format("{:.2f} / {:.2f}", 1e3 * r.step_s, 1e3 * r.fitted_step_s),
                 fmt::format("{:.2f} / {:.2f}", 1e3 * r.comm_wait_s, 1e3 * r.fitted_exposed_s)});
  return t;
}

Table cells_table(const Plan& p) {
  Table t{{"replicas", "global batch", "per replica", "step (ms)", "steps", "steps (fit / noise)", "time to target (s)",
           "80% interval (s)", "device-s", "images/s", "scaling eff.", "lr (rule)", "linear baseline (s)",
           "throughput baseline (s)", "flags"}};
  for (const auto& c : p.cells) {
    std::vector<std::string> flags = c.flags;
    if (c.calibrated) flags.insert(flags.begin(), "calibrated (not held out)");
    t.push_back({fmt::format("{}", c.replicas), fmt::format("{}", c.global_batch),
                 fmt::format("{:.0f}", c.per_replica_batch), num(1e3 * c.step_s, "{:.2f}"), num(c.steps, "{:.0f}"),
                 fmt::format("{} / {}", num(c.steps_fit, "{:.0f}"), num(c.steps_noise, "{:.0f}")),
                 num(c.time_to_target_s, "{:.1f}"), interval_text(c), num(c.device_s, "{:.1f}"),
                 num(c.images_per_s, "{:.0f}"), num(c.scaling_efficiency, "{:.2f}"), num(c.lr, "{:.4g}"),
                 num(c.linear_ttt_s, "{:.1f}"), num(c.throughput_ttt_s, "{:.1f}"),
                 fmt::format("{}", fmt::join(flags, "; "))});
  }
  return t;
}

// The scale rule whose factor at twice the batch (1, sqrt 2, 2) is nearest to `gain` (in log).
const char* nearest_rule(double gain) {
  if (!std::isfinite(gain) || !(gain > 0)) return "-";
  const char* best = "-";
  double distance = std::numeric_limits<double>::infinity();
  for (const auto rule : {config::ScaleRule::kNone, config::ScaleRule::kSqrt, config::ScaleRule::kLinear}) {
    const double d = std::abs(std::log(gain / config::lr_scale(rule, 2, 1)));
    if (d < distance) distance = d, best = config::name(rule);
  }
  return best;
}

Table doubled_table(const Plan& p) {
  Table t{{"B", "steps at B (1 replica)", "steps at 2B (2 replicas)", "S(2B) / S(B) (half: 0.50)",
           "lr at B / at 2B by the calibration's rule", "lr at 2B suggested (x S(B) / S(2B))", "nearest rule"}};
  for (const auto& d : p.doubled)
    t.push_back({fmt::format("{}{}", d.batch, d.extrapolated ? " (B or 2B outside the batches run to the target)" : ""),
                 num(d.steps, "{:.0f}"), num(d.doubled_steps, "{:.0f}"), num(d.ratio(), "{:.2f}"),
                 fmt::format("{} / {}", num(d.lr, "{:.4g}"), num(d.doubled_lr, "{:.4g}")),
                 num(d.lr / d.ratio(), "{:.4g}"), nearest_rule(1 / d.ratio())});
  return t;
}

// What the seed question's answer rests on: the steps model and the lrs it was fitted at.
std::vector<std::string> doubled_basis(const Plan& p) {
  std::vector<std::string> out;
  out.push_back(
      p.steps_fit
          ? fmt::format("Prediction, not a measurement: from S(B) = {:.0f} (1 + {:.0f} / B), fitted on {} global "
                        "batches, S(2B) / S(B) = (2B + B_crit) / (2 (B + B_crit)), above 1/2 whenever B_crit > 0 and "
                        "near it only for B well below B_crit.",
                        p.steps_fit->s_min, p.steps_fit->b_crit, p.calibrated_steps.size())
          : "Prediction, not a measurement: from the noise-scale estimate (no McCandlish fit).");
  std::vector<double> lrs;
  std::vector<std::string> at;
  for (const auto& [b, lr] : p.calibrated_lrs)
    if (std::isfinite(lr)) lrs.push_back(lr), at.push_back(fmt::format("{:.4g} at {}", lr, b));
  const bool same = !lrs.empty() &&
                    *std::max_element(lrs.begin(), lrs.end()) <= *std::min_element(lrs.begin(), lrs.end()) * (1 + 1e-9);
  if (lrs.empty())
    out.push_back("The calibration runs' lrs are unknown (their spec.json does not resolve).");
  else if (same)
    out.push_back(
        fmt::format("The calibration ran every batch at the same lr ({}; scale_rule {}), so these are "
                    "predictions for 2 replicas at the same lr.",
                    at.front(), p.lr_rule));
  else
    out.push_back(fmt::format(
        "The calibration ran at the lrs of scale_rule {} ({}), so S(2B) is predicted at the rule's lr at 2B, not at "
        "the same lr: the calibration has no larger batch at the same lr, and the steps model cannot say what it does "
        "(cells whose lr leaves the calibrated ones are flagged).",
        p.lr_rule, fmt::join(at, ", ")));
  out.push_back(
      "What lr: the steps model suggests raising the lr at 2B by S(B) / S(2B), AdaScale's gain; with the McCandlish "
      "fit this is 2 (B + B_crit) / (2B + B_crit), McCandlish's ratio of optimal lrs with B_noise taken as B_crit: "
      "the linear rule (2x) well below B_crit, none (1x) well above it. A run at 2B with that lr checks it.");
  return out;
}

std::vector<Section> plan_sections(const Plan& p) {
  std::vector<Section> s;
  s.push_back({"",
               {paragraph(fmt::format("Sealed {}: SHA-256 {} of plan.json (ddplab plan --check verifies it).",
                                      p.created, p.hash))}});
  s.push_back({"Recommendation", {bullets(recommendation_lines(p)), Block{Block::Kind::kChart, {}, {}}}});
  s.push_back({"Predictions", {table(cells_table(p))}});
  s.push_back({"The seed question: 2 replicas at twice the global batch",
               {paragraph("Does 2 replicas at twice the global batch (the same per-replica batch) reach the target of "
                          "1 replica in half the steps?"),
                table(doubled_table(p)), bullets(doubled_basis(p))}});
  s.push_back({"Models",
               {bullets(models_lines(p)),
                paragraph("Step time on the calibration runs (medians over epochs), measured and as the fitted model "
                          "gives it back:"),
                table(step_fit_table(p)),
                paragraph(fmt::format("Baselines: linear speedup from {} x {} ({:.1f} s; T ~ 1/N, S ~ 1/B, so the "
                                      "same epochs), and throughput only ({:.2f} epochs at each cell's predicted "
                                      "images/s).",
                                      p.reference.replicas, p.reference.global_batch, p.reference_ttt_s,
                                      p.reference_epochs))}});
  if (!p.notes.empty()) s.push_back({"Notes", {bullets(p.notes)}});
  s.push_back({"Calibration runs", {bullets(p.calibration_runs)}});
  return s;
}

std::string chart_caption(const Plan& p) {
  return fmt::format(
      "Predicted time to {} per global batch, one line per replica count (both axes logarithmic); the recommended "
      "cells are marked and labelled.",
      p.target.describe());
}

std::string markdown_block(const Plan& p, const Block& b) {
  switch (b.kind) {
    case Block::Kind::kParagraph:
      return report::md_cell(b.lines.front()) + "\n";
    case Block::Kind::kList: {
      std::string o;
      for (const auto& line : b.lines) o += fmt::format("- {}\n", report::md_cell(line));
      return o;
    }
    case Block::Kind::kTable:
      return report::md_table(b.table);
    case Block::Kind::kChart:
      return fmt::format("![{}]({})\n\n{}\n", plan_chart(p).title, kChartFile, report::md_cell(chart_caption(p)));
  }
  return "";
}

std::string html_block(const Plan& p, const Block& b) {
  switch (b.kind) {
    case Block::Kind::kParagraph:
      return fmt::format("<p>{}</p>\n", report::escape_html(b.lines.front()));
    case Block::Kind::kList: {
      std::string o = "<ul>\n";
      for (const auto& line : b.lines) o += fmt::format("<li>{}</li>\n", report::escape_html(line));
      return o + "</ul>\n";
    }
    case Block::Kind::kTable:
      return report::html_table(b.table, "plan");
    case Block::Kind::kChart:
      return fmt::format("<figure>\n{}<figcaption>{}</figcaption>\n</figure>\n", report::render_svg(plan_chart(p)),
                         report::escape_html(chart_caption(p)));
  }
  return "";
}

std::string title_of(const Plan& p) { return fmt::format("Plan: time to {}", p.target.describe()); }
}  // namespace

report::LineChart plan_chart(const Plan& p) {
  report::LineChart chart = report::line_chart("plan_ttt", "Predicted time to target vs global batch",
                                               "global batch (log2 scale)", "predicted time to target, s (log scale)");
  chart.x_scale = report::XScale::kLog2;
  chart.log_y = true;
  std::map<int, std::vector<size_t>> by_replicas;
  for (size_t i = 0; i < p.cells.size(); ++i) by_replicas[p.cells[i].replicas].push_back(i);
  for (auto& [n, cells] : by_replicas) {
    std::sort(cells.begin(), cells.end(),
              [&](size_t a, size_t b) { return p.cells[a].global_batch < p.cells[b].global_batch; });
    report::ChartSeries s;
    s.label = fmt::format("{} replica{}", n, n == 1 ? "" : "s");
    s.colour = static_cast<int>(chart.series.size());
    for (size_t i : cells) {
      std::vector<std::string> marks;
      if (p.fastest == i) marks.emplace_back("fastest");
      if (p.cheapest == i) marks.emplace_back("cheapest");
      s.x.push_back(static_cast<double>(p.cells[i].global_batch));
      s.y.push_back(p.cells[i].time_to_target_s);
      s.point_colour.push_back(marks.empty() ? -1 : s.colour);
      s.point_label.push_back(fmt::format("{}", fmt::join(marks, ", ")));
    }
    chart.series.push_back(std::move(s));
  }
  return chart;
}

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
            {"doubled_batch", doubled_json(*this)},
            {"reference",
             {{"replicas", reference.replicas},
              {"global_batch", reference.global_batch},
              {"time_to_target_s", reference_ttt_s},
              {"epochs", reference_epochs}}},
            {"spread",
             {{"seed_cv", number(spread.seed_cv)},
              {"seed_batches", spread.seed_batches},
              {"step_log_rms", spread.step_log_rms},
              {"z", kIntervalZ}}},
            {"samples_per_epoch", samples_per_epoch},
            {"notes", notes},
            {"calibration_runs", calibration_runs},
            {"created", created},
            {"spec", spec}};
  if (probe) j["probe"] = probe->to_json();
  if (step_time_fitted) j["step_time_fitted"] = step_time_json(*step_time_fitted);
  j["fastest"] = fastest ? json(*fastest) : json(nullptr);
  j["cheapest"] = cheapest ? json(*cheapest) : json(nullptr);
  return j;
}

std::string render_plan_markdown(const Plan& p) {
  std::string out = fmt::format("# {}\n", report::md_cell(title_of(p)));
  for (const auto& section : plan_sections(p)) {
    if (!section.heading.empty()) out += fmt::format("\n## {}\n", section.heading);
    for (const auto& b : section.blocks) out += "\n" + markdown_block(p, b);
  }
  return out;
}

std::string render_plan_html(const Plan& p) {
  std::string out = report::html_page_start(fmt::format("ddplab {}", title_of(p)));
  out += fmt::format("<h1>{}</h1>\n", report::escape_html(title_of(p)));
  for (const auto& section : plan_sections(p)) {
    if (!section.heading.empty()) out += fmt::format("<h2>{}</h2>\n", report::escape_html(section.heading));
    for (const auto& b : section.blocks) out += html_block(p, b);
  }
  return out + report::html_page_end();
}

std::vector<fs::path> write_plan(const Plan& plan, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  const std::vector<fs::path> files = {out_dir / "plan.json", out_dir / "plan.md", out_dir / "plan.html",
                                       out_dir / kChartFile};
  rundir::write_file_atomic(files[0], plan.to_json().dump(2) + "\n");
  rundir::write_file_atomic(files[1], render_plan_markdown(plan));
  rundir::write_file_atomic(files[2], render_plan_html(plan));
  rundir::write_file_atomic(files[3], report::render_svg(plan_chart(plan)));
  return files;
}

}  // namespace ddplab::plan
