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

const GroupStats* lowest_peak(const ReportData& data) {
  const GroupStats* lowest = nullptr;
  for (const auto& g : data.groups)
    if (std::isfinite(mean_curve_peak(data, g)) &&
        (!lowest || mean_curve_peak(data, g) < mean_curve_peak(data, *lowest)))
      lowest = &g;
  return lowest;
}

std::optional<double> chosen_target(const ReportData& data) {
  const GroupStats* lowest = lowest_peak(data);
  if (!lowest) return std::nullopt;
  // Down to 0.1 points: every group's mean curve reaches it.
  return std::floor(mean_curve_peak(data, *lowest) * 1000 + 1e-9) / 1000;
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

std::string effective_change(const EffectiveSettings& a, const EffectiveSettings& b) {
  const auto change = [](const std::string& x, const std::string& y) {
    return x == y ? fmt::format("{} (unchanged)", x) : fmt::format("{} \xE2\x86\x92 {}", x, y);
  };
  const auto lr = [](double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : std::string(kDash); };
  const auto whole = [](double v) { return fixed(v, 0); };
  const auto batch = [](int64_t v) { return v > 0 ? fmt::format("{}", v) : std::string(kDash); };
  std::string o = batch(a.global_batch) == batch(b.global_batch)
                      ? std::string("global batch unchanged")
                      : fmt::format("global batch {}", change(batch(a.global_batch), batch(b.global_batch)));
  o += whole(a.steps_per_epoch) == whole(b.steps_per_epoch)
           ? std::string(", steps/epoch unchanged")
           : fmt::format(", steps/epoch {}", change(whole(a.steps_per_epoch), whole(b.steps_per_epoch)));
  if (lr(a.lr_first) == lr(b.lr_first) && lr(a.lr_peak) == lr(b.lr_peak)) return o + ", lr unchanged";
  if (lr(a.lr_first) == lr(a.lr_peak) && lr(b.lr_first) == lr(b.lr_peak))
    return o + fmt::format(", lr {}", change(lr(a.lr_first), lr(b.lr_first)));
  return o + fmt::format(", lr {} at the first epoch, peak {}", change(lr(a.lr_first), lr(b.lr_first)),
                         change(lr(a.lr_peak), lr(b.lr_peak)));
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
