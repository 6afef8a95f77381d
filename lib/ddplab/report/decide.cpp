#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "ddplab/report/analysis.h"
#include "ddplab/report/cells.h"

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The highest point of the group's mean curve (chosen_target), NaN when it has no such runs.
double mean_curve_peak(const ReportData& data, const GroupStats& g) {
  std::map<int, std::vector<double>> by_epoch;
  for (size_t ri : g.runs) {
    const RunData& r = data.runs[ri];
    if (r.health() != RunHealth::kOk) continue;
    for (const auto& e : r.epochs)
      if (std::isfinite(selection_acc(e, data.on_validation)))
        by_epoch[e.epoch].push_back(selection_acc(e, data.on_validation));
  }
  double peak = kNaN;
  for (const auto& [epoch, accs] : by_epoch) peak = std::isfinite(peak) ? std::max(peak, mean(accs)) : mean(accs);
  return peak;
}
}  // namespace

namespace {
// The best one run reached: its highest selection_acc over its epoch records; NaN without one.
double run_peak(const RunData& r, bool on_validation) {
  const rundir::EpochRecord* e = r.best_epoch(on_validation);
  return e ? selection_acc(*e, on_validation) : kNaN;
}

// The peaks of a group's finished runs, or none when one of its runs collapsed or diverged.
std::vector<double> reliable_peaks(const ReportData& data, const GroupStats& g) {
  std::vector<double> peaks;
  for (size_t ri : g.runs) {
    const std::optional<RunHealth> health = data.runs[ri].health();
    if (!health) continue;
    if (*health != RunHealth::kOk) return {};
    peaks.push_back(run_peak(data.runs[ri], data.on_validation));
  }
  return peaks;
}

// The group whose mean curve peaks highest: of all groups, or of those with kChosenTargetRuns
// reliable runs; nullptr when there is none.
const GroupStats* highest_peak(const ReportData& data, bool reliable_only) {
  const GroupStats* best = nullptr;
  for (const auto& g : data.groups) {
    const double peak = mean_curve_peak(data, g);
    if (!std::isfinite(peak) || (best && peak <= mean_curve_peak(data, *best))) continue;
    if (!reliable_only || reliable_peaks(data, g).size() >= static_cast<size_t>(kChosenTargetRuns)) best = &g;
  }
  return best;
}
}  // namespace

ChosenTarget chosen_target(const ReportData& data) {
  ChosenTarget t;
  const GroupStats* any = highest_peak(data, false);
  if (!any) {
    t.refusal = "no group has a finished run that did not collapse or diverge";
    return t;
  }
  const GroupStats* best = highest_peak(data, true);
  t.set_by = (best ? best : any)->label;
  t.best_peak = mean_curve_peak(data, best ? *best : *any);
  if (!best) {
    t.refusal =
        fmt::format("no group has {} finished runs, none collapsed or diverged, to show what it reaches reliably",
                    kChosenTargetRuns);
    return t;
  }
  const std::vector<double> peaks = reliable_peaks(data, *best);
  t.runs = static_cast<int>(peaks.size());
  t.reliable = *std::min_element(peaks.begin(), peaks.end());
  // Down to 0.1 points, so that every run of the best group reaches it.
  t.acc = std::floor((t.reliable - data.equivalence_pts / 100) * 1000 + 1e-9) / 1000;
  return t;
}

double time_to_target(const GroupStats& g) {
  return g.target_reached > 0 ? g.target_wall_s : std::numeric_limits<double>::quiet_NaN();
}

bool first_beyond_spread(const GroupStats& a, const GroupStats& b) {
  if (a.target_reached == 0) return false;
  return b.target_reached == 0 || a.target_wall_s_max < b.target_wall_s_min;
}

namespace {
// Each group's class of identical runs (the groups its identical comparisons join it to, directly
// or through others), named by the class's lowest group index.
std::vector<size_t> identical_classes(const ReportData& d) {
  std::vector<size_t> cls(d.groups.size());
  for (size_t i = 0; i < cls.size(); ++i) cls[i] = i;
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& c : d.comparisons) {
      const size_t low = std::min(cls[c.a], cls[c.b]);
      if (!c.identical || (cls[c.a] == low && cls[c.b] == low)) continue;
      cls[c.a] = cls[c.b] = low;
      changed = true;
    }
  }
  return cls;
}
}  // namespace

// Identical runs train alike, so their times differ by the host's load alone: a class of them
// takes part once, as its fastest group, and the others are named beside the fastest.
Recommendation recommend(const ReportData& d) {
  Recommendation r;
  std::vector<const GroupStats*> reached;
  for (const auto& g : d.groups)
    if (std::isfinite(time_to_target(g))) (g.collapsed + g.diverged > 0 ? r.left_out : reached).push_back(&g);
  for (const GroupStats* g : reached)
    if (!r.fastest || g->target_wall_s < r.fastest->target_wall_s) r.fastest = g;
  if (!r.fastest) return r;
  const std::vector<size_t> cls = identical_classes(d);
  const auto class_of = [&](const GroupStats& g) { return cls[static_cast<size_t>(&g - d.groups.data())]; };
  const auto stands_for_its_class = [&](const GroupStats& g) {
    return std::none_of(reached.begin(), reached.end(), [&](const GroupStats* o) {
      return o != &g && class_of(*o) == class_of(g) &&
             (o->target_wall_s < g.target_wall_s || (o->target_wall_s == g.target_wall_s && o < &g));
    });
  };
  for (const GroupStats* p : reached) {
    const GroupStats& g = *p;
    if (&g != r.fastest && class_of(g) == class_of(*r.fastest)) r.identical.push_back(&g);
    if (!stands_for_its_class(g)) continue;
    if (&g != r.fastest && !first_beyond_spread(*r.fastest, g)) r.uncertain.push_back(&g);
    const bool near = g.target_wall_s <= (1 + kCheapestWithin) * r.fastest->target_wall_s;
    if (near && (!r.cheapest || g.target_device_s < r.cheapest->target_device_s)) r.cheapest = &g;
  }
  return r;
}

bool EffectiveSettings::scheduled() const {
  return std::isfinite(lr_spec) && std::isfinite(lr_scaled) && std::isfinite(lr_scheduled_peak);
}

namespace {
std::string change_text(const std::string& x, const std::string& y) {
  return x == y ? fmt::format("{} (unchanged)", x) : fmt::format("{} \xE2\x86\x92 {}", x, y);
}

std::string lr_text(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : std::string(kDash); }

// ", lr ..." of effective_change.
std::string lr_change(const EffectiveSettings& a, const EffectiveSettings& b) {
  if (a.scheduled() && b.scheduled()) {
    const auto same = [](double x, double y) { return lr_text(x) == lr_text(y); };
    if (same(a.lr_spec, b.lr_spec) && same(a.lr_scaled, b.lr_scaled) && same(a.lr_scheduled_peak, b.lr_scheduled_peak))
      return ", lr unchanged";
    std::string o = fmt::format(", lr {} in the spec", change_text(lr_text(a.lr_spec), lr_text(b.lr_spec)));
    if (!same(a.lr_scaled, a.lr_spec) || !same(b.lr_scaled, b.lr_spec))
      o += fmt::format(", scaled {}", change_text(lr_text(a.lr_scaled), lr_text(b.lr_scaled)));
    if (!same(a.lr_scheduled_peak, a.lr_scaled) || !same(b.lr_scheduled_peak, b.lr_scaled))
      o += fmt::format(", peak {} as scheduled",
                       change_text(lr_text(a.lr_scheduled_peak), lr_text(b.lr_scheduled_peak)));
    return o;
  }
  if (lr_text(a.lr_first) == lr_text(b.lr_first) && lr_text(a.lr_peak) == lr_text(b.lr_peak)) return ", lr unchanged";
  if (lr_text(a.lr_first) == lr_text(a.lr_peak) && lr_text(b.lr_first) == lr_text(b.lr_peak))
    return fmt::format(", lr {}", change_text(lr_text(a.lr_first), lr_text(b.lr_first)));
  return fmt::format(", lr {} at the end of epoch 1, highest recorded {}",
                     change_text(lr_text(a.lr_first), lr_text(b.lr_first)),
                     change_text(lr_text(a.lr_peak), lr_text(b.lr_peak)));
}
}  // namespace

std::string effective_change(const EffectiveSettings& a, const EffectiveSettings& b) {
  const auto whole = [](double v) { return fixed(v, 0); };
  const auto batch = [](int64_t v) { return v > 0 ? fmt::format("{}", v) : std::string(kDash); };
  std::string o = batch(a.global_batch) == batch(b.global_batch)
                      ? std::string("global batch unchanged")
                      : fmt::format("global batch {}", change_text(batch(a.global_batch), batch(b.global_batch)));
  o += whole(a.steps_per_epoch) == whole(b.steps_per_epoch)
           ? std::string(", steps/epoch unchanged")
           : fmt::format(", steps/epoch {}", change_text(whole(a.steps_per_epoch), whole(b.steps_per_epoch)));
  return o + lr_change(a, b);
}

std::string noise_scale_sentence(const GroupStats& g) {
  if (!g.noise_scale_unreliable.empty()) return fmt::format("not reliable here ({})", g.noise_scale_unreliable);
  return noise_scale_verdict(static_cast<double>(g.global_batch), g.noise_scale_last).sentence;
}

NoiseScaleVerdict noise_scale_verdict(double global_batch, double b_noise) {
  NoiseScaleVerdict v;
  v.ratio = global_batch / b_noise;
  // steps(B) ~ 1 + B_noise / B, samples(B) ~ 1 + B / B_noise.
  v.steps_saved = 1 - (1 + 1 / (2 * v.ratio)) / (1 + 1 / v.ratio);
  v.samples_added = (1 + 2 * v.ratio) / (1 + v.ratio) - 1;
  const char* where = v.ratio < 0.25 ? "far below B_noise, where more replicas should cut the steps almost linearly"
                      : v.ratio < 1  ? "below B_noise, where more replicas should still cut the steps well, with "
                                       "diminishing returns"
                      : v.ratio < 4  ? "above B_noise, where more replicas should cut the steps less and less"
                                     : "far above B_noise, where more replicas should buy almost nothing (the steps "
                                       "barely fall while the samples processed grow)";
  v.sentence = fmt::format(
      "global batch {:.0f} is {:.2g} x B_noise (~{:.0f}): {}; predicted from B_noise alone (McCandlish et al.'s "
      "model, which assumes the lr tuned at each batch), doubling it would save about {:.0f}% of the steps (ideal "
      "50%) for {:.0f}% more samples.",
      global_batch, v.ratio, b_noise, where, 100 * v.steps_saved, 100 * v.samples_added);
  return v;
}

}  // namespace ddplab::report
