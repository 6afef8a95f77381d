#include "ddplab/report/cells.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ddplab/rundir/health.h"

namespace ddplab::report {

std::string fixed(double v, int decimals) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : kDash; }

std::string pct(double v) { return std::isfinite(v) ? fmt::format("{}%", fixed(100 * v, 2)) : kDash; }

std::string pm(const MeanStd& m, int n, int decimals, double scale, const char* unit) {
  if (!std::isfinite(m.mean)) return kDash;
  if (n < 2) return fmt::format("{}{}", fixed(scale * m.mean, decimals), unit);
  return fmt::format("{} \xC2\xB1 {}{}", fixed(scale * m.mean, decimals), fixed(scale * m.std, decimals), unit);
}

std::string percent_cell(double v) { return std::isfinite(v) ? fmt::format("{:.0f}%", v) : kDash; }

std::string pct_pm(const MeanStd& m, int n) { return pm(m, n, 2, 100, "%"); }

const char* chosen_set(const ReportData& d) { return d.on_validation ? "validation" : "test"; }

std::string target_cell(const GroupStats& g) {
  if (!g.target_acc) return kDash;
  if (g.target_reached == 0) return fmt::format("not reached (0/{})", g.n);
  return fmt::format("epoch {}, {} s ({}/{})", fixed(g.target_epochs, 1), fixed(g.target_wall_s, 1), g.target_reached,
                     g.n);
}

std::string efficiency_cell(const ReportData& d, const GroupStats& g) {
  if (!g.scaling_efficiency) return kDash;
  if (&d.groups[*g.baseline] == &g) return fmt::format("{} (baseline)", fixed(*g.scaling_efficiency, 2));
  // More than N times the images/s of one replica is no speed-up that data parallelism can give:
  // the runs met different loads on the machine.
  const GroupStats& base = d.groups[*g.baseline];
  const std::string flag =
      *g.scaling_efficiency > 1
          ? fmt::format(
                "; above 1: the runs saw different machine loads, not a speed-up (host {} here, {} at the "
                "baseline)",
                host_load_text(g), host_load_text(base))
          : std::string();
  return fmt::format("{} (vs {}{})", fixed(*g.scaling_efficiency, 2), base.label, flag);
}

std::string host_load_text(const GroupStats& g) {
  if (!std::isfinite(g.host_cpu_wait_pct)) return "load not measured";
  std::string o = fmt::format("CPU wait {:.0f}%", g.host_cpu_wait_pct);
  if (std::isfinite(g.host_steal_pct) && g.host_steal_pct >= 0.5) o += fmt::format(", steal {:.0f}%", g.host_steal_pct);
  return o;
}

std::string speed_ratio_cell(const GroupStats& a, const GroupStats& b) {
  const std::string ratio = ratio_cell(b.images_per_s, a.images_per_s);
  if (a.replicas == b.replicas || !std::isfinite(b.images_per_s / a.images_per_s)) return ratio;
  const GroupStats &more = a.replicas > b.replicas ? a : b, &fewer = a.replicas > b.replicas ? b : a;
  const double ideal = static_cast<double>(more.replicas) / fewer.replicas;
  if (!(more.images_per_s / fewer.images_per_s > ideal)) return ratio;
  return fmt::format(
      "{}; {} replicas gave more than {:g}\xC3\x97 the images/s of {}, beyond what data parallelism can give: the "
      "host's load, not a speed-up (A: {}; B: {})",
      ratio, more.replicas, ideal, fewer.replicas, host_load_text(a), host_load_text(b));
}

std::string throughput_cell(const GroupStats& g) {
  if (g.n < 2) return fixed(g.images_per_s, 1);
  return fmt::format("{} ({}–{})", fixed(g.images_per_s, 1), fixed(g.images_per_s_min, 1),
                     fixed(g.images_per_s_max, 1));
}

std::string n_cell(const GroupStats& g) {
  std::string n = g.collapsed + g.diverged > 0 ? ok_of_ended(g) : fmt::format("{}", g.n);
  if (g.poor > 0) n += fmt::format(" ({} poor)", g.poor);
  if (g.in_progress > 0) return fmt::format("{} (+{} in progress)", n, g.in_progress);
  return n;
}

std::string signed_pts(double v) {
  if (!std::isfinite(v)) return kDash;
  return fmt::format("{:+.2f}", std::fabs(v) < 0.005 ? 0.0 : v);
}

std::string p_cell(double p) {
  if (!std::isfinite(p)) return kDash;
  return p < 1e-4 ? std::string("< 0.0001") : fixed(p, 4);
}

std::string diff_cell(const Comparison& c) {
  return std::isfinite(c.diff) ? fmt::format("{} pts", signed_pts(c.diff)) : kDash;
}

std::string ci_cell(const Comparison& c) {
  if (c.method == CompareMethod::too_few) return kDash;
  if (!std::isfinite(c.ci_low)) return "no interval: no spread between seeds";
  return fmt::format("{} to {}", signed_pts(c.ci_low), signed_pts(c.ci_high));
}

std::string n_pairs_cell(const Comparison& c) {
  if (c.method == CompareMethod::paired) return fmt::format("{} pairs", c.n_pairs);
  return fmt::format("{} / {}", c.n_a, c.n_b);
}

std::string method_cell(const Comparison& c) {
  switch (c.method) {
    case CompareMethod::paired:
      return "paired by seed";
    case CompareMethod::welch:
      return "Welch";
    case CompareMethod::too_few:
      return "too few runs";
  }
  return kDash;
}

std::string metric_cell(const GroupStats& g) {
  return pm(g.metric, static_cast<int>(g.metric_by_seed.size()), 2, 1, " pts");
}

std::string test_se_cell(const GroupStats& g) {
  if (!std::isfinite(g.test_sampling_error_pts)) return kDash;
  return fmt::format("\xC2\xB1{} pts (n_test {})", fixed(g.test_sampling_error_pts, 2), *g.test_samples);
}

size_t holm_family(const ReportData& d) {
  size_t m = 0;
  for (const auto& c : d.comparisons) m = std::max(m, c.stats.m);
  return m;
}

std::string method_cell(const GroupComparison& c) { return c.identical ? "identical" : method_cell(c.stats); }

std::string ci_cell(const GroupComparison& c) { return c.identical ? std::string(kDash) : ci_cell(c.stats); }

std::string verdict_text(const GroupComparison& c) {
  return c.identical ? std::string("identical runs") : std::string(verdict_name(c.stats.verdict));
}

std::string measured_saving_cell(double saved) {
  return saved > 0.5 ? fmt::format("{} (above the ideal 50%: outside the model)", percent_cell(100 * saved))
                     : percent_cell(100 * saved);
}

std::string ratio_cell(double b, double a) {
  return std::isfinite(b / a) && a > 0 ? fmt::format("{}\xC3\x97", fixed(b / a, 2)) : kDash;
}

const char* first_by_value(double va, double vb) {
  return !std::isfinite(vb) || va < vb ? " (A first)" : !std::isfinite(va) || vb < va ? " (B first)" : "";
}

std::string arrow_cell(const std::string& a, const std::string& b, double va, double vb, const char* first) {
  if (!std::isfinite(va) && !std::isfinite(vb)) return kDash;
  return fmt::format("{} \xE2\x86\x92 {}{}", std::isfinite(va) ? a : "not reached",
                     std::isfinite(vb) ? b : "not reached", first);
}

std::string poor_text(const RunData& r) {
  if (!r.poor()) return "";
  return fmt::format("poor: final test accuracy {} under the floor {} ({:g} \xC3\x97 chance)", pct(r.final_test_acc()),
                     pct(rundir::kPoorAccFactor / r.classes()), rundir::kPoorAccFactor);
}

std::string early_stop_text(const RunData& r) {
  const nlohmann::json stop = r.manifest.value("early_stop", nlohmann::json());
  if (!stop.is_object()) return "";
  const nlohmann::json epochs = r.spec.value("epochs", nlohmann::json());
  return fmt::format("stopped early after epoch {}{}: {} best at epoch {}", stop.value("epochs_done", 0),
                     epochs.is_number_integer() ? fmt::format(" of {}", epochs.get<int64_t>()) : std::string(),
                     stop.value("metric", std::string("?")), stop.value("best_epoch", 0));
}

}  // namespace ddplab::report
