#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/report/analysis.h"

using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string value_in(const GroupStats& g, const std::string& k) { return value_text(g.key_spec.value(k, json())); }

// Fills c.stats: group B's metric against group A's, paired by seed where it can be.
void compare_metric(const ReportData& data, GroupComparison& c) {
  const GroupStats &ga = data.groups[c.a], &gb = data.groups[c.b];
  CompareOptions options;
  options.delta = data.equivalence_pts;
  c.stats = compare_by_seed(ga.metric_by_seed, gb.metric_by_seed, options);
  if (std::isfinite(ga.test_sampling_error_pts) && std::isfinite(gb.test_sampling_error_pts))
    c.stats.resolution_floor = std::max(ga.test_sampling_error_pts, gb.test_sampling_error_pts);
  // The metric is accuracy in points, so B - A lies in [-100, 100]: the t interval of two spread
  // seeds can reach past that, and what lies past it is impossible.
  for (double* end : {&c.stats.ci_low, &c.stats.ci_high, &c.stats.ci90_low, &c.stats.ci90_high})
    if (std::isfinite(*end)) *end = std::clamp(*end, -100.0, 100.0);
  if (ga.collapsed + ga.diverged + gb.collapsed + gb.diverged > 0)
    c.bad_runs_p = fisher_exact_two_sided(ga.collapsed + ga.diverged, ga.n, gb.collapsed + gb.diverged, gb.n);
}

// The index of the setting in data.settings that holds key k; settings.size() for none.
size_t setting_of(const ReportData& data, const std::string& k) {
  const auto s = std::find_if(data.settings.begin(), data.settings.end(),
                              [&](const Setting& s) { return std::count(s.keys.begin(), s.keys.end(), k) > 0; });
  return static_cast<size_t>(s - data.settings.begin());
}

// Groups a and b compared on the metric, when they differ in exactly one setting (derived
// settings that follow it aside) and both have a spec. Holm's correction comes later.
std::optional<GroupComparison> compare(const ReportData& data, size_t a, size_t b) {
  const GroupStats &ga = data.groups[a], &gb = data.groups[b];
  const auto all_ab = keys_between(data, ga, gb);
  std::set<size_t> changed;
  std::vector<std::string> followers;
  for (const auto& k : all_ab) {
    const auto f = leaders().find(k);
    if (f != leaders().end() && std::count(all_ab.begin(), all_ab.end(), f->second) > 0)
      followers.push_back(k);
    else
      changed.insert(setting_of(data, k));
  }
  if (changed.size() != 1 || *changed.begin() == data.settings.size() || ga.key_spec.contains("run") ||
      gb.key_spec.contains("run"))
    return std::nullopt;
  const Setting& setting = data.settings[*changed.begin()];
  GroupComparison c;
  c.a = a;
  c.b = b;
  c.key = setting.name;
  c.value_a = setting_text(ga, setting);
  c.value_b = setting_text(gb, setting);
  for (const auto& k : followers)
    c.followers.push_back(fmt::format("{}: {} vs {}", k, value_in(ga, k), value_in(gb, k)));
  compare_metric(data, c);
  return c;
}

// The one group whose settings have every value of `selector` (dotted key -> value); a warning
// naming `where` and nothing when none or several do.
std::optional<size_t> group_selected(ReportData& data, const json& selector, const std::string& where) {
  std::vector<size_t> found;
  for (size_t g = 0; g < data.groups.size(); ++g) {
    const json& spec = data.groups[g].key_spec;
    bool all = selector.is_object() && !selector.empty();
    for (auto it = selector.begin(); all && it != selector.end(); ++it)
      all = spec.contains(it.key()) && spec[it.key()] == it.value();
    if (all) found.push_back(g);
  }
  if (found.size() == 1) return found.front();
  std::string labels;
  for (size_t g : found) labels += fmt::format("{}\"{}\"", labels.empty() ? "" : ", ", data.groups[g].label);
  data.warnings.push_back(found.empty()
                              ? fmt::format("{}: {} selects no group; the contrast is left out", where, selector.dump())
                              : fmt::format("{}: {} selects {} groups ({}); name more settings", where, selector.dump(),
                                            found.size(), labels));
  return std::nullopt;
}

// report.contrasts[i]: groups a and b compared on the metric whatever settings they differ in.
std::optional<GroupComparison> planned_contrast(ReportData& data, const json& contrast, size_t i) {
  const std::string where = fmt::format("report.contrasts[{}]", i);
  const auto a = group_selected(data, contrast.value("a", json()), where + ".a");
  const auto b = group_selected(data, contrast.value("b", json()), where + ".b");
  if (!a || !b || *a == *b) return std::nullopt;
  GroupComparison c;
  c.a = *a;
  c.b = *b;
  c.planned = contrast.value("name", where);
  for (const auto& k : keys_between(data, data.groups[*a], data.groups[*b])) {
    const auto sep = c.key.empty() ? "" : ", ";
    c.key += sep + k;
    c.value_a += sep + value_in(data.groups[*a], k);
    c.value_b += sep + value_in(data.groups[*b], k);
  }
  compare_metric(data, c);
  return c;
}

// Whether runs a and b trained alike: the same epochs with the same global batch, lr, step,
// losses and accuracies, bit for bit.
bool same_training(const RunData& a, const RunData& b) {
  if (a.epochs.size() != b.epochs.size()) return false;
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    const rundir::EpochRecord &x = a.epochs[i], &y = b.epochs[i];
    if (x.epoch != y.epoch || x.step != y.step || x.global_batch != y.global_batch || !same(x.lr, y.lr) ||
        !same(x.train_loss, y.train_loss) || !same(x.train_acc, y.train_acc) || !same(x.test_loss, y.test_loss) ||
        !same(x.test_acc, y.test_acc))
      return false;
  }
  return true;
}

// The finished runs of `g` with records, by seed (a repeated seed keeps its first run).
std::map<int64_t, const RunData*> finished_by_seed(const ReportData& data, const GroupStats& g) {
  std::map<int64_t, const RunData*> out;
  for (size_t ri : g.runs)
    if (data.runs[ri].finished() && !data.runs[ri].epochs.empty()) out.emplace(seed_of(data.runs[ri]), &data.runs[ri]);
  return out;
}

// Marks c identical when every seed that A and B both finished trained alike in both (and one did).
void mark_identical(const ReportData& data, GroupComparison& c) {
  const auto a = finished_by_seed(data, data.groups[c.a]), b = finished_by_seed(data, data.groups[c.b]);
  size_t shared = 0;
  for (const auto& [seed, run] : a) {
    const auto it = b.find(seed);
    if (it == b.end()) continue;
    if (!same_training(*run, *it->second)) return;
    ++shared;
  }
  c.identical = shared > 0;
  c.identical_seeds = shared;
}

std::string identical_sentence(const GroupComparison& c, const ReportData& data) {
  return fmt::format(
      "identical runs: {} and {} trained alike, every epoch's records equal bit for bit in each of the {} seed{} "
      "they share, so changing {} from {} to {} did nothing here (e.g. an lr scale rule at the base batch, factor "
      "1); no verdict, and not counted in Holm's correction",
      data.groups[c.a].label, data.groups[c.b].label, c.identical_seeds, c.identical_seeds == 1 ? "" : "s", c.key,
      c.value_a, c.value_b);
}

// Identical runs test nothing: no p, no interval, no verdict's inputs, out of Holm's family (m 0).
// The difference (0) and the seeds stay.
void untested(Comparison& s) {
  s.p = s.p_adjusted = kNaN;
  s.ci_low = s.ci_high = s.ci90_low = s.ci90_high = kNaN;
  s.m = 0;
  s.within_delta = s.borderline = false;
  s.verdict = Verdict::cant_tell;
  s.seeds_needed.reset();
  s.equivalence_seeds.reset();
}

// " Compared: ... Fisher's exact test ...": the runs left out of a comparison, when there are some.
std::string bad_runs_sentence(const ReportData& data, const GroupComparison& c) {
  if (!c.bad_runs_p) return "";
  const GroupStats &a = data.groups[c.a], &b = data.groups[c.b];
  return fmt::format(
      ". Compared: {} of {}, {} of {}; the runs that collapsed to chance or diverged are left out, and how often each "
      "group had them is compared by Fisher's exact test: p = {}",
      ok_of_ended(a), a.label, ok_of_ended(b), b.label, fmt::format("{:.2g}", *c.bad_runs_p));
}
}  // namespace

void compare_groups(ReportData& data) {
  for (size_t a = 0; a < data.groups.size(); ++a)
    for (size_t b = a + 1; b < data.groups.size(); ++b)
      if (auto c = compare(data, a, b)) data.comparisons.push_back(std::move(*c));
  const json contrasts = report_setting(data.runs, "contrasts");
  for (size_t i = 0; contrasts.is_array() && i < contrasts.size(); ++i) {
    auto c = planned_contrast(data, contrasts[i], i);
    const bool known =
        c && std::any_of(data.comparisons.begin(), data.comparisons.end(), [&](const GroupComparison& o) {
          return (o.a == c->a && o.b == c->b) || (o.a == c->b && o.b == c->a);
        });
    if (c && !known) data.comparisons.push_back(std::move(*c));
  }
  std::vector<Comparison> stats;
  std::vector<GroupComparison*> tested;  // the comparisons in Holm's family
  for (auto& c : data.comparisons) {
    mark_identical(data, c);
    if (c.identical) {
      untested(c.stats);
      c.sentence = identical_sentence(c, data);
      continue;
    }
    stats.push_back(c.stats);
    tested.push_back(&c);
  }
  adjust_for_multiple_comparisons(stats);
  for (size_t i = 0; i < stats.size(); ++i) {
    GroupComparison& c = *tested[i];
    c.stats = stats[i];
    c.sentence = describe(c.stats, data.groups[c.a].label, data.groups[c.b].label) + bad_runs_sentence(data, c);
  }
}

}  // namespace ddplab::report
