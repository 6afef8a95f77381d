// The report against its swept settings: the summary's changes and the axis charts (report.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/report/report.h"
#include "ddplab/report/svg.h"

using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "k=v, ..." over the keys of `settings`, "" for none.
std::string label_over(const GroupStats& g, const std::vector<Setting>& settings) {
  std::vector<std::string> parts;
  for (const auto& s : settings)
    for (const auto& k : s.keys) parts.push_back(fmt::format("{}={}", k, value_text(g.key_spec.value(k, json()))));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Whether groups a and b agree on every swept setting but `setting`.
bool same_elsewhere(const ReportData& d, const GroupStats& a, const GroupStats& b, const Setting& setting) {
  for (const auto& s : d.settings)
    if (s.name != setting.name && setting_value(a, s) != setting_value(b, s)) return false;
  return true;
}
}  // namespace

std::vector<SettingChange> summary_changes(const ReportData& d) {
  std::vector<SettingChange> out;
  for (const auto& setting : d.settings) {
    std::vector<Setting> others;
    for (const auto& s : d.settings)
      if (s.name != setting.name) others.push_back(s);
    for (size_t i = 0; i < d.comparisons.size(); ++i) {
      const GroupComparison& c = d.comparisons[i];
      if (!c.planned.empty() || c.key != setting.name) continue;
      const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
      const json va = setting_value(a, setting), vb = setting_value(b, setting);
      const bool between = std::any_of(d.groups.begin(), d.groups.end(), [&](const GroupStats& g) {
        const json v = setting_value(g, setting);
        return same_elsewhere(d, a, g, setting) && std::min(va, vb) < v && v < std::max(va, vb);
      });
      if (!between) out.push_back({i, label_over(a, others)});
    }
  }
  for (size_t i = 0; i < d.comparisons.size(); ++i)
    if (!d.comparisons[i].planned.empty()) out.push_back({i, ""});
  return out;
}

std::string tradeoff_refusal(const std::vector<double>& batch, const std::vector<double>& steps) {
  std::map<double, double> samples;  // by batch
  for (size_t i = 0; i < batch.size() && i < steps.size(); ++i)
    if (batch[i] > 0 && std::isfinite(steps[i])) samples[batch[i]] = steps[i] * batch[i];
  for (auto it = samples.begin(); it != samples.end() && std::next(it) != samples.end(); ++it) {
    const auto next = std::next(it);
    if (!(next->second > it->second))
      return fmt::format(
          "samples to target fall from {:.0f} at batch {:.0f} to {:.0f} at batch {:.0f}, where "
          "McCandlish's model has them grow: the smaller batch was held back by something else "
          "(an lr tuned for another batch?)",
          it->second, it->first, next->second, next->first);
  }
  return "";
}

std::optional<BatchTradeoffFit> fit_batch_tradeoff(const std::vector<double>& batch, const std::vector<double>& steps) {
  if (!tradeoff_refusal(batch, steps).empty()) return std::nullopt;
  std::vector<double> x, y;
  for (size_t i = 0; i < batch.size() && i < steps.size(); ++i) {
    if (!(batch[i] > 0) || !std::isfinite(steps[i])) continue;
    x.push_back(1 / batch[i]);
    y.push_back(steps[i]);
  }
  if (x.size() < 2) return std::nullopt;
  const double mx = mean(x), my = mean(y);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 1e-300)) return std::nullopt;  // one distinct batch
  const double slope = sxy / sxx, intercept = my - slope * mx;
  if (!(intercept > 0) || !(slope > 0)) return std::nullopt;
  BatchTradeoffFit fit;
  fit.s_min = intercept;
  fit.b_crit = slope / intercept;
  fit.e_min = fit.s_min * fit.b_crit;
  return fit;
}

namespace {
using GroupValue = std::function<double(const GroupStats&)>;

// The groups with finished runs whose `x` is finite, by the label of the swept keys that `x`
// does not determine (a key with one value per value of x, as replicas.count for the global batch
// at a fixed per-replica batch, is part of x, not another line; so is every key of `part_of_x`).
std::map<std::string, std::vector<size_t>> lines_over(const ReportData& d, const GroupValue& x,
                                                      const std::vector<std::string>& part_of_x = {}) {
  std::vector<Setting> rest;
  for (const auto& s : d.settings) {
    if (std::any_of(s.keys.begin(), s.keys.end(),
                    [&](const std::string& k) { return std::count(part_of_x.begin(), part_of_x.end(), k) > 0; }))
      continue;
    std::map<double, std::set<std::string>> values;
    for (const auto& g : d.groups)
      if (g.n > 0) values[x(g)].insert(setting_value(g, s).dump());
    if (std::any_of(values.begin(), values.end(), [](const auto& v) { return v.second.size() > 1; })) rest.push_back(s);
  }
  std::map<std::string, std::vector<size_t>> lines;
  for (size_t i = 0; i < d.groups.size(); ++i)
    if (d.groups[i].n > 0 && std::isfinite(x(d.groups[i]))) lines[label_over(d.groups[i], rest)].push_back(i);
  for (auto& [label, groups] : lines)
    std::sort(groups.begin(), groups.end(), [&](size_t a, size_t b) { return x(d.groups[a]) < x(d.groups[b]); });
  return lines;
}

// A line's groups by their value of x.
std::map<double, std::vector<size_t>> by_x(const ReportData& d, const std::vector<size_t>& groups,
                                           const GroupValue& x) {
  std::map<double, std::vector<size_t>> out;
  for (size_t gi : groups) out[x(d.groups[gi])].push_back(gi);
  return out;
}

// Whether the finished groups hold at least 2 distinct values of x.
bool varies(const ReportData& d, const GroupValue& x) {
  std::set<double> values;
  for (const auto& g : d.groups)
    if (g.n > 0 && std::isfinite(x(g))) values.insert(x(g));
  return values.size() > 1;
}

double global_batch(const GroupStats& g) { return static_cast<double>(g.global_batch); }
double replica_count(const GroupStats& g) { return g.replicas; }

// A line over several groups: grey, told apart from the chart's other lines by its dashes
// (the line_index-th pattern), its points in their groups' colours.
ChartSeries grey_line(std::string label, size_t line_index) {
  static const char* const kDashes[] = {"", "6,3", "2,3", "8,3,2,3", "12,4"};
  ChartSeries s;
  s.label = label.empty() ? std::string("all groups") : std::move(label);
  s.colour = kNeutralColour;
  s.dash_pattern = kDashes[line_index % (sizeof(kDashes) / sizeof(kDashes[0]))];
  return s;
}

// The palette index of the one group at a point, or -1 (the line's grey) when several are pooled there.
int point_colour_of(const std::vector<size_t>& groups_at) {
  return groups_at.size() == 1 ? static_cast<int>(groups_at[0]) : -1;
}

// A series of y over x for each line of lines_over(x) ("all groups" when nothing else varies).
ChartSeries line_series(const ReportData& d, const std::string& label, size_t line_index,
                        const std::vector<size_t>& groups, const GroupValue& x, const GroupValue& y) {
  ChartSeries s = grey_line(label, line_index);
  for (size_t gi : groups) {
    if (!std::isfinite(y(d.groups[gi]))) continue;
    s.x.push_back(x(d.groups[gi]));
    s.y.push_back(y(d.groups[gi]));
    s.point_colour.push_back(static_cast<int>(gi));
  }
  return s;
}

// The comparisons' metric vs global batch, with each group's 95% t interval over its seeds.
NamedChart accuracy_vs_batch(const ReportData& d) {
  const std::string metric = d.final_epochs > 1
                                 ? fmt::format("test accuracy, mean of the last {} epochs", d.final_epochs)
                                 : std::string("final test accuracy");
  LineChart chart = line_chart("acc_vs_batch", fmt::format("{} vs global batch (bars: 95% CI over seeds)", metric),
                               "global batch (log2 scale)", fmt::format("{} (%)", metric));
  chart.x_scale = XScale::kLog2;
  chart.y_floor = 0, chart.y_ceil = 100;
  bool pooled = false;
  for (const auto& [label, groups] : lines_over(d, global_batch, kBatchKeys)) {
    ChartSeries s = grey_line(label, chart.series.size());
    for (const auto& [batch, at] : by_x(d, groups, global_batch)) {
      std::vector<double> values;  // every seed's metric of the groups at this batch
      for (size_t gi : at)
        for (const auto& [seed, v] : d.groups[gi].metric_by_seed)
          if (std::isfinite(v)) values.push_back(v);
      if (values.empty()) continue;
      const double n = static_cast<double>(values.size()), m = mean(values);
      const double half = n >= 2 ? student_t_quantile(0.975, n - 1) * sample_std(values) / std::sqrt(n) : kNaN;
      // An interval from 2 seeds (t = 12.7) may reach past 0 or 100%: the bar then ends at the
      // axis in an arrow (LineChart::y_ceil). One seed has no interval, and no bar.
      s.x.push_back(batch), s.y.push_back(m);
      s.err_lo.push_back(std::isfinite(half) ? m - half : kNaN);
      s.err_hi.push_back(std::isfinite(half) ? m + half : kNaN);
      s.point_colour.push_back(point_colour_of(at));
      pooled = pooled || at.size() > 1;
    }
    chart.series.push_back(std::move(s));
  }
  std::string caption = fmt::format(
      "Each point is the mean {} over the seeds of the groups at that global batch, in its group's colour{}; bars: "
      "the 95% t interval over those seeds (none with one seed), drawn to the axis with an arrow where it reaches "
      "past it.",
      metric, pooled ? " (grey: groups that reach one batch through different splits, pooled)" : "");
  return {"acc_vs_batch.svg", chart.title, render_svg(chart), caption};
}

// y vs replica count per line; with `ideal`, each line's dashed ideal linear scaling from its
// fewest replicas.
NamedChart over_replicas(const ReportData& d, LineChart chart, const GroupValue& y, bool ideal, std::string caption) {
  chart.integer_x = true;
  size_t index = 0;
  for (const auto& [label, groups] : lines_over(d, replica_count)) {
    ChartSeries s = line_series(d, label, index++, groups, replica_count, y);
    ChartSeries line;
    if (ideal && !s.x.empty()) {
      line.label =
          fmt::format("{}: ideal linear scaling from {} replica{}", s.label, s.x.front(), s.x.front() == 1 ? "" : "s");
      line.dashed = true;
      line.dash_pattern = s.dash_pattern;  // its measured line's dashes, in light grey
      line.markers = false;
      line.colour = kLightNeutralColour;
      for (double n : s.x) line.x.push_back(n), line.y.push_back(s.y.front() * n / s.x.front());
    }
    chart.series.push_back(std::move(s));
    if (ideal && !line.x.empty()) chart.series.push_back(std::move(line));
  }
  return {fmt::format("{}.svg", chart.id), chart.title, render_svg(chart), std::move(caption)};
}

// Steps to the target of a group: to report.target_loss from the step records, else to the
// target accuracy at the first epoch reaching it (mean over the finished runs that did).
double steps_to_target(const ReportData& d, const GroupStats& g) {
  if (d.target_loss) return g.target_loss_reached > 0 ? g.target_loss_steps : kNaN;
  return g.target_reached > 0 ? g.target_steps : kNaN;
}

// "84.30% validation accuracy": the accuracy target, in the set that chooses.
std::string accuracy_target(const ReportData& d) {
  return fmt::format("{:.2f}% {} accuracy", 100 * *d.target_acc, d.on_validation ? "validation" : "test");
}

// One point on the fit at batch b, as its own grey series (a marker) labelled `name` on the chart.
ChartSeries fit_marker(const BatchTradeoffFit& fit, double b, const std::string& label, const std::string& name) {
  ChartSeries m;
  m.label = label;
  m.colour = kNeutralColour;
  m.x = {fit.samples(b)};
  m.y = {fit.steps(b)};
  m.point_label = {name};
  return m;
}

// The fitted curve of one line, and its markers at the fitted B_crit and the measured B_simple.
void add_fit(const std::vector<double>& batches, const BatchTradeoffFit& fit, double b_simple, const std::string& label,
             LineChart& chart) {
  ChartSeries curve;
  curve.label = fmt::format("{}: fit S_min = {:.0f} steps, E_min = {:.3g} samples", label, fit.s_min, fit.e_min);
  curve.dashed = true;
  curve.markers = false;
  curve.colour = kNeutralColour;
  const double lo = *std::min_element(batches.begin(), batches.end()) / 4;
  const double hi = *std::max_element(batches.begin(), batches.end()) * 4;
  for (int i = 0; i <= 40; ++i) {
    const double b = lo * std::pow(hi / lo, i / 40.0);
    curve.x.push_back(fit.samples(b));
    curve.y.push_back(fit.steps(b));
  }
  chart.series.push_back(std::move(curve));
  chart.series.push_back(fit_marker(fit, fit.b_crit, fmt::format("{}: fitted B_crit = {:.0f}", label, fit.b_crit),
                                    fmt::format("B_crit {:.0f}", fit.b_crit)));
  if (b_simple > 0)
    chart.series.push_back(
        fit_marker(fit, b_simple,
                   fmt::format("{}: measured B_simple = {:.0f} (mean over the groups' last epochs)", label, b_simple),
                   fmt::format("B_simple {:.0f}", b_simple)));
}

// Steps vs samples to the target across global batches, with the McCandlish fit per line.
std::optional<NamedChart> batch_tradeoff(const ReportData& d) {
  const std::string target = d.target_loss  ? fmt::format("training loss {:g}", *d.target_loss)
                             : d.target_acc ? accuracy_target(d)
                                            : std::string();
  if (target.empty()) return std::nullopt;
  LineChart chart = line_chart("batch_tradeoff", fmt::format("Steps vs samples to {} across global batches", target),
                               "samples to target (log scale)", "steps to target (log scale)");
  chart.x_scale = XScale::kLog10;
  chart.log_y = true;
  bool any = false, fitted = false, b_simple = false;
  size_t index = 0;
  for (const auto& [label, groups] : lines_over(d, global_batch, kBatchKeys)) {
    ChartSeries s = grey_line(fmt::format("{} (measured)", label.empty() ? std::string("all groups") : label), index++);
    std::vector<double> batches, steps, noise;
    for (const auto& [b, at] : by_x(d, groups, global_batch)) {
      std::vector<double> to_target;  // the groups at this batch that reached the target
      for (size_t gi : at) {
        if (std::isfinite(steps_to_target(d, d.groups[gi]))) to_target.push_back(steps_to_target(d, d.groups[gi]));
        if (d.groups[gi].noise_scale_last > 0) noise.push_back(d.groups[gi].noise_scale_last);
      }
      if (to_target.empty()) continue;
      const double st = mean(to_target);
      batches.push_back(b), steps.push_back(st), s.x.push_back(st * b), s.y.push_back(st);
      s.point_colour.push_back(point_colour_of(at));
      s.point_label.push_back(fmt::format("B = {:g}", b));
    }
    if (s.x.size() < 2) continue;
    any = true;
    if (const std::string why = tradeoff_refusal(batches, steps); !why.empty())
      s.label += fmt::format("; no fit: {}", why);
    chart.series.push_back(std::move(s));
    if (const auto fit = fit_batch_tradeoff(batches, steps)) {
      add_fit(batches, *fit, noise.empty() ? kNaN : mean(noise), label.empty() ? "all" : label, chart);
      fitted = true;
      b_simple = b_simple || !noise.empty();
    }
  }
  if (!any) return std::nullopt;
  std::string caption = fmt::format(
      "Each labelled point is a global batch B at the mean samples and steps to {}{} over the runs that reached it{}.",
      target, d.target_loss ? " (from the step records)" : " (at epoch granularity)",
      fitted ? fmt::format("; dashed: the fit S = S_min (1 + B_crit / B), E = E_min (1 + B / B_crit) (McCandlish "
                           "et al. 2018) with the fitted B_crit{} marked on it",
                           b_simple ? " and the measured gradient noise scale B_simple" : "")
             : std::string("; no fit (the legend says why)"));
  return NamedChart{"batch_tradeoff.svg", chart.title, render_svg(chart), caption};
}

int ended_runs(const GroupStats& g) { return g.n + g.collapsed + g.diverged; }

// "84.52 ±0.31 (n=3)"; with failed runs "84.52 (n=1), 2 collapsed", or "2 of 2 runs collapsed".
std::string heatmap_cell(const GroupStats& g) {
  if (g.n == 0) return failed_runs(g);
  const size_t n = g.metric_by_seed.size();
  if (g.collapsed + g.diverged > 0) {
    const int failed = g.collapsed + g.diverged;
    return fmt::format("{:.2f} (n={}), {} {}", g.metric.mean, n, failed,
                       g.diverged == 0    ? "collapsed"
                       : g.collapsed == 0 ? "diverged"
                                          : "failed");
  }
  return n > 1 ? fmt::format("{:.2f} \xC2\xB1{:.2f} (n={})", g.metric.mean, g.metric.std, n)
               : fmt::format("{:.2f} (n=1)", g.metric.mean);
}

// The sorted values of `setting` over the groups with ended runs when all are numbers, else empty.
std::vector<double> numeric_values(const ReportData& d, const Setting& setting) {
  std::set<double> values;
  for (const auto& g : d.groups) {
    if (ended_runs(g) == 0) continue;
    const json v = setting_value(g, setting);
    if (!v.is_number()) return {};
    values.insert(v.get<double>());
  }
  return {values.begin(), values.end()};
}

// Exactly two swept settings, both numeric with 2 or more values: the metric over the grid.
std::optional<NamedChart> metric_heatmap(const ReportData& d) {
  const auto& keys = d.settings;
  if (keys.size() != 2) return std::nullopt;
  const auto xs = numeric_values(d, keys[0]), ys = numeric_values(d, keys[1]);
  if (xs.size() < 2 || ys.size() < 2) return std::nullopt;
  Heatmap m;
  m.id = "acc_heatmap";
  m.title = fmt::format("{} over {} and {}", d.final_epochs > 1 ? "Test accuracy (last epochs)" : "Final test accuracy",
                        keys[0].name, keys[1].name);
  m.x_label = keys[0].name;
  m.y_label = keys[1].name;
  m.z_label = "mean over seeds, points";
  for (double x : xs) m.x_values.push_back(fmt::format("{:g}", x));
  for (double y : ys) m.y_values.push_back(fmt::format("{:g}", y));
  m.z.assign(ys.size(), std::vector<double>(xs.size(), kNaN));
  m.text.assign(ys.size(), std::vector<std::string>(xs.size(), "no runs"));
  for (const auto& g : d.groups) {
    if (ended_runs(g) == 0) continue;
    const auto c = std::find(xs.begin(), xs.end(), setting_value(g, keys[0]).get<double>()) - xs.begin();
    const auto r = std::find(ys.begin(), ys.end(), setting_value(g, keys[1]).get<double>()) - ys.begin();
    m.z[r][c] = g.n > 0 ? g.metric.mean : kNaN;
    m.text[r][c] = heatmap_cell(g);
  }
  return NamedChart{"acc_heatmap.svg", m.title, render_heatmap(m),
                    "Each cell: the mean over seeds in points, \xC2\xB1 the standard deviation, and the seeds (n); "
                    "runs that collapsed to chance or diverged are left out of the mean and counted after it (grey: "
                    "all of the cell's runs failed)."};
}
}  // namespace

std::vector<NamedChart> axis_charts(const ReportData& d) {
  std::vector<NamedChart> out;
  if (varies(d, global_batch)) out.push_back(accuracy_vs_batch(d));
  if (varies(d, replica_count)) {
    out.push_back(over_replicas(
        d,
        line_chart("throughput_vs_replicas", "Images/s vs replicas (light grey: ideal linear scaling)", "replicas",
                   "training images/s (mean over epochs and seeds)"),
        [](const GroupStats& g) { return g.images_per_s; }, true,
        "Each point is a group's mean images/s (over epochs and seeds), in its colour; a grey line joins the groups "
        "that differ only in the replica count, and the light grey one with its dashes scales its fewest replicas' "
        "images/s linearly."));
    const bool reached =
        std::any_of(d.groups.begin(), d.groups.end(), [](const GroupStats& g) { return g.target_reached > 0; });
    if (reached && d.target_acc)
      out.push_back(over_replicas(
          d,
          line_chart("target_time_vs_replicas", fmt::format("Time to {} vs replicas", accuracy_target(d)), "replicas",
                     "wall-clock seconds to target (mean over the runs that reached it)"),
          [](const GroupStats& g) { return g.target_reached > 0 ? g.target_wall_s : kNaN; }, false,
          "Each point is a group's mean wall-clock seconds to the first epoch at the target, over its runs that "
          "reached it, in its colour."));
  }
  if (varies(d, global_batch))
    if (auto chart = batch_tradeoff(d)) out.push_back(std::move(*chart));
  if (auto chart = metric_heatmap(d)) out.push_back(std::move(*chart));
  return out;
}

namespace {

// The steps per batch averaged over `seeds` (one seed may be drawn several times).
std::pair<std::vector<double>, std::vector<double>> mean_steps(
    const std::vector<const std::map<double, double>*>& seeds) {
  std::map<double, std::vector<double>> at;
  for (const auto* s : seeds)
    for (const auto& [batch, steps] : *s) at[batch].push_back(steps);
  std::vector<double> batches, steps;
  for (const auto& [batch, xs] : at) batches.push_back(batch), steps.push_back(mean(xs));
  return {batches, steps};
}

void resample_seeds(const std::vector<const std::map<double, double>*>& seeds, CriticalBatchEstimate& e) {
  std::mt19937_64 draw(1);
  std::vector<double> b_crit;
  for (int r = 0; r < kCriticalBatchResamples; ++r) {
    std::vector<const std::map<double, double>*> drawn;
    for (size_t i = 0; i < seeds.size(); ++i) drawn.push_back(seeds[draw() % seeds.size()]);
    const auto [batches, steps] = mean_steps(drawn);
    if (const auto fit = fit_batch_tradeoff(batches, steps))
      b_crit.push_back(fit->b_crit);
    else
      ++e.resamples_refused;
  }
  e.resamples = kCriticalBatchResamples;
  if (static_cast<int>(seeds.size()) < kCriticalBatchIntervalSeeds)
    e.interval_refusal =
        fmt::format("{} seeds: too few to resample ({} needed)", seeds.size(), kCriticalBatchIntervalSeeds);
  else if (e.resamples_refused > kCriticalBatchRefusedShare * e.resamples)
    e.interval_refusal = fmt::format("{} of {} resamples refused by the model: the others' spread is no interval",
                                     e.resamples_refused, e.resamples);
  if (!e.interval_refusal.empty()) return;
  e.low = percentile(b_crit, 0.025);
  e.high = percentile(b_crit, 0.975);
}

}  // namespace

CriticalBatchEstimate estimate_critical_batch(const std::map<int64_t, std::map<double, double>>& steps_by_seed,
                                              double target) {
  CriticalBatchEstimate e;
  e.target = target;
  e.low = e.high = kNaN;
  std::vector<const std::map<double, double>*> seeds;
  for (const auto& [seed, steps] : steps_by_seed) {
    if (steps.size() < 2) continue;
    seeds.push_back(&steps);
    std::vector<double> batches, s;
    for (const auto& [b, st] : steps) batches.push_back(b), s.push_back(st);
    if (const auto fit = fit_batch_tradeoff(batches, s))
      e.per_seed.push_back(fit->b_crit);
    else
      ++e.seeds_refused;
  }
  e.seeds = static_cast<int>(seeds.size());
  const auto [batches, steps] = mean_steps(seeds);
  e.refusal = tradeoff_refusal(batches, steps);
  if (batches.size() < 2 && e.refusal.empty()) e.refusal = "fewer than 2 global batches reached the target";
  e.fit = fit_batch_tradeoff(batches, steps);
  if (!e.fit && e.refusal.empty()) e.refusal = "the steps do not fall as the batch grows";
  if (seeds.size() >= 2) resample_seeds(seeds, e);
  return e;
}

std::vector<double> critical_batch_targets(double target_loss) {
  return {target_loss, target_loss * 4 / 3, target_loss * 5 / 3};
}

std::vector<std::pair<std::string, CriticalBatchEstimate>> critical_batch_estimates(const ReportData& d) {
  std::vector<std::pair<std::string, CriticalBatchEstimate>> out;
  if (!d.target_loss) return out;
  for (const auto& [label, groups] : lines_over(d, global_batch, kBatchKeys)) {
    for (double target : critical_batch_targets(*d.target_loss)) {
      std::map<int64_t, std::map<double, double>> steps_by_seed;
      for (size_t gi : groups)
        for (size_t ri : d.groups[gi].runs) {
          const RunData& r = d.runs[ri];
          const rundir::StepRecord* p = r.finished() ? r.steps_to_loss(target) : nullptr;
          if (p == nullptr) continue;
          const int64_t seed = r.spec.is_object() ? r.spec.value("seed", int64_t{0}) : 0;
          steps_by_seed[seed][global_batch(d.groups[gi])] = static_cast<double>(p->step);
        }
      out.emplace_back(label.empty() ? std::string("all groups") : label,
                       estimate_critical_batch(steps_by_seed, target));
    }
  }
  return out;
}

}  // namespace ddplab::report
