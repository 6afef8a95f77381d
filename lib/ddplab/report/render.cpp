#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/report/page.h"
#include "ddplab/report/report.h"
#include "ddplab/report/svg.h"
#include "ddplab/rundir/run_log.h"

namespace fs = std::filesystem;

namespace ddplab::report {

namespace {
const char* const kDash = "\xE2\x80\x94";  // em dash: no value

std::string fixed(double v, int decimals) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : kDash; }
std::string pct(double v) { return std::isfinite(v) ? fmt::format("{}%", fixed(100 * v, 2)) : kDash; }
// "mean +- std"; a single run has no spread to show.
std::string pm(const MeanStd& m, int n, int decimals, double scale = 1, const char* unit = "") {
  if (!std::isfinite(m.mean)) return kDash;
  if (n < 2) return fmt::format("{}{}", fixed(scale * m.mean, decimals), unit);
  return fmt::format("{} \xC2\xB1 {}{}", fixed(scale * m.mean, decimals), fixed(scale * m.std, decimals), unit);
}
// "12%" of a value already in percent; a dash for NaN.
std::string percent_cell(double v) { return std::isfinite(v) ? fmt::format("{:.0f}%", v) : kDash; }

std::string pct_pm(const MeanStd& m, int n) { return pm(m, n, 2, 100, "%"); }
std::string csv_num(double v) { return std::isfinite(v) ? fmt::format("{:.10g}", v) : ""; }
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "validation" or "test": the set whose accuracy chooses (ReportData::on_validation).
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
  const char* flag = *g.scaling_efficiency > 1 ? "; above 1: the runs saw different machine loads, not a speed-up" : "";
  return fmt::format("{} (vs {}{})", fixed(*g.scaling_efficiency, 2), d.groups[*g.baseline].label, flag);
}

// Mean images/s of the group's runs, with their range when there are several.
std::string throughput_cell(const GroupStats& g) {
  if (g.n < 2) return fixed(g.images_per_s, 1);
  return fmt::format("{} ({}–{})", fixed(g.images_per_s, 1), fixed(g.images_per_s_min, 1),
                     fixed(g.images_per_s_max, 1));
}
std::string n_cell(const GroupStats& g) {
  const std::string n = g.collapsed + g.diverged > 0 ? ok_of_ended(g) : fmt::format("{}", g.n);
  if (g.in_progress > 0) return fmt::format("{} (+{} in progress)", n, g.in_progress);
  return n;
}
// Points to 2 decimals with a sign, never "-0.00".
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
// The metric of a group (mean +- std in points over its seeds).
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
// The method and the 95% interval of a comparison: "identical" and none for identical runs.
std::string method_cell(const GroupComparison& c) { return c.identical ? "identical" : method_cell(c.stats); }
std::string ci_cell(const GroupComparison& c) { return c.identical ? std::string(kDash) : ci_cell(c.stats); }
// The verdict column of comparisons.csv: verdict_name, or "identical runs".
std::string verdict_text(const GroupComparison& c) {
  return c.identical ? std::string("identical runs") : std::string(verdict_name(c.stats.verdict));
}

// B_simple per group with what more replicas buy (groups without a noise scale left out).
// "29%", or "75% (above the ideal 50%: outside the model)" when doubling the batch cut the steps
// by more than half (fewer samples at the larger batch, which the model does not allow).
std::string measured_saving_cell(double saved) {
  return saved > 0.5 ? fmt::format("{} (above the ideal 50%: outside the model)", percent_cell(100 * saved))
                     : percent_cell(100 * saved);
}

Table noise_scale_table(const ReportData& d) {
  Table t = {{"group", "replicas", "global batch", "B_simple first epoch", "B_simple last epoch",
              "global batch / B_simple", "what more replicas buy (predicted)",
              "steps saved by 2x batch: predicted / measured"}};
  for (const auto& g : d.groups) {
    if (!std::isfinite(g.noise_scale_last) && g.noise_scale_unreliable.empty()) continue;
    const double ratio = static_cast<double>(g.global_batch) / g.noise_scale_last;
    const double predicted =
        g.noise_scale_unreliable.empty()
            ? noise_scale_verdict(static_cast<double>(g.global_batch), g.noise_scale_last).steps_saved
            : std::numeric_limits<double>::quiet_NaN();
    const std::string measured = g.measured_steps_saved ? measured_saving_cell(*g.measured_steps_saved)
                                 : d.target_loss        ? std::string("no run at 2x")
                                                        : std::string("no report.target_loss");
    t.push_back({g.label, fmt::format("{}", g.replicas), fmt::format("{}", g.global_batch),
                 fixed(g.noise_scale_first, 0), fixed(g.noise_scale_last, 0), fixed(ratio, 2), noise_scale_sentence(g),
                 fmt::format("{} / {}", percent_cell(100 * predicted), measured)});
  }
  return t;
}

const char* const kNoiseScaleNote =
    "B_simple = tr(\xCE\xA3) / |G|\xC2\xB2 estimates the gradient noise scale B_noise (McCandlish et al. 2018), "
    "measured from the replicas' local and all-reduced gradients (EMAs over steps); it usually grows as training "
    "goes on. The steps to a given loss scale as S_min (1 + B_noise / B): far below B_noise more replicas (a larger "
    "global batch) cut the steps almost linearly; far above it they buy nothing. The verdict uses the last epoch's "
    "value. Left out: runs that diverged or ended near chance (final training and test accuracy below 1.5 / classes) "
    "and epochs "
    "whose learning rate fell below 10% of the run's peak. See docs/beyond.md.";

// Under the tables with a best epoch: which set chose it.
std::string best_note(const ReportData& d) {
  return d.on_validation ? "* chosen on the validation set: each run's epoch of highest validation accuracy, whose "
                           "test accuracy is reported beside it (the test set chose nothing)."
                         : "* best over epochs: optimistic, chosen on the test set (no validation split).";
}

// The target's heading: "time to 84.30% (chosen)".
std::string target_heading(const ReportData& d) {
  if (!d.target_acc) return "time to target (none: no finished runs)";
  return fmt::format("time to {} {} acc{}", pct(*d.target_acc), chosen_set(d), d.target_chosen ? " (chosen)" : "");
}

Table groups_table(const ReportData& d) {
  std::vector<std::string> head = {"group", "n", "final test acc", "test-set SE"};
  if (d.on_validation)
    head.insert(head.end(), {"best val acc*", "test acc at that epoch*"});
  else
    head.push_back("best test acc*");
  head.insert(head.end(), {"final train loss", "final test loss", target_heading(d), "images/s (range over runs)",
                           "scaling efficiency"});
  Table t = {head};
  for (const auto& g : d.groups) {
    std::vector<std::string> row = {g.label, n_cell(g), pct_pm(g.final_test_acc, g.n), test_se_cell(g)};
    if (d.on_validation)
      row.insert(row.end(), {pct_pm(g.chosen_val_acc, g.n), pct_pm(g.chosen_test_acc, g.n)});
    else
      row.push_back(pct_pm(g.best_test_acc, g.n));
    row.insert(row.end(), {pm(g.final_train_loss, g.n, 4), pm(g.final_test_loss, g.n, 4), target_cell(g),
                           throughput_cell(g), efficiency_cell(d, g)});
    t.push_back(row);
  }
  return t;
}

// Per group: what it took to reach the target accuracy (means over the runs that reached it).
Table target_table(const ReportData& d) {
  Table t = {{"group", "reached", "epoch", "optimizer steps", "samples (steps \xC3\x97 global batch)",
              "wall-clock s (fastest\xE2\x80\x93slowest run)", "device-s (wall \xC3\x97 replicas)"}};
  for (const auto& g : d.groups) {
    if (g.n == 0) continue;
    const std::string wall = g.target_reached > 1
                                 ? fmt::format("{} ({}\xE2\x80\x93{})", fixed(g.target_wall_s, 1),
                                               fixed(g.target_wall_s_min, 1), fixed(g.target_wall_s_max, 1))
                                 : fixed(g.target_wall_s, 1);
    t.push_back({g.label, fmt::format("{}/{}", g.target_reached, g.n), fixed(g.target_epochs, 1),
                 fixed(g.target_steps, 0), fixed(g.target_samples, 0), wall, fixed(g.target_device_s, 1)});
  }
  return t;
}

Table comparisons_table(const ReportData& d) {
  const std::string metric = d.final_epochs > 1 ? fmt::format("acc (last {} epochs)", d.final_epochs) : "final acc";
  Table t = {{"differs in", "group A", "group B", fmt::format("A {}", metric), fmt::format("B {}", metric),
              "difference (B - A)", "95% CI", "n", "method", "adjusted p", "verdict"}};
  for (const auto& c : d.comparisons) {
    const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
    std::string what = fmt::format("{}: {} vs {}", c.key, c.value_a, c.value_b);
    for (const auto& f : c.followers) what += fmt::format(" ({} follows)", f);
    if (!c.planned.empty()) what = fmt::format("{} (planned): {}", c.planned, what);
    t.push_back({what, a.label, b.label, metric_cell(a), metric_cell(b), diff_cell(c.stats), ci_cell(c),
                 n_pairs_cell(c.stats), method_cell(c), p_cell(c.stats.p_adjusted), c.sentence});
  }
  return t;
}

Table runs_table(const ReportData& d) {
  Table t = {{"run", "group", "status", "epochs", "final test acc",
              d.on_validation ? "test acc at best val epoch*" : "best test acc*", "final train loss", "images/s",
              "host CPU wait / steal"}};
  for (const auto& r : d.runs) {
    std::string status = r.status_text();
    if (!r.message.empty()) status += fmt::format(": {}", r.message);
    const double wait = r.mean_host_cpu_wait_pct(), steal = r.mean_host_steal_pct();
    const std::string host = std::isfinite(wait) || std::isfinite(steal)
                                 ? fmt::format("{} / {}", percent_cell(wait), percent_cell(steal))
                                 : kDash;
    const rundir::EpochRecord* best = r.best_epoch(d.on_validation);
    t.push_back({r.run_id, d.groups[r.group].label, status, fmt::format("{}", r.epochs.size()), pct(r.final_test_acc()),
                 pct(best ? best->test_acc : std::nan("")), fixed(r.final_train_loss(), 4),
                 fixed(r.mean_images_per_s(), 1), host});
  }
  return t;
}

// A verdict in a few words, naming B's value of the changed setting.
std::string verdict_words(const GroupComparison& c, double delta) {
  const Comparison& s = c.stats;
  if (c.identical) return "identical runs";
  switch (s.verdict) {
    case Verdict::b_better:
      return fmt::format("{} better", c.value_b);
    case Verdict::b_worse:
      return fmt::format("{} worse", c.value_b);
    case Verdict::equivalent:
      return fmt::format("equivalent within \xC2\xB1{:g} pts{}", delta, s.borderline ? " (borderline)" : "");
    case Verdict::cant_tell:
      if (s.method == CompareMethod::too_few) return "can't tell (too few runs)";
      if (s.seeds_needed) return fmt::format("can't tell \xE2\x80\x94 about {} seeds would", *s.seeds_needed);
      return "can't tell";
  }
  return kDash;
}

double failed_share(const GroupStats& g) {
  const int failed = g.collapsed + g.diverged;
  return failed == 0 ? 0.0 : failed / static_cast<double>(g.n + failed);
}

// When one group's runs failed (collapsed or diverged) more often than the other's, that decides:
// "256 worse: 2 of 3 runs collapsed (64: 0 of 3 runs collapsed; Fisher's exact p = 0.4)"; else "".
std::string failure_verdict(const ReportData& d, const GroupComparison& c) {
  const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
  if (!c.bad_runs_p || failed_share(a) == failed_share(b)) return "";
  const std::string p = fmt::format("Fisher's exact p = {:.2g}", *c.bad_runs_p);
  if (failed_share(b) > failed_share(a))
    return fmt::format("{} worse: {} ({}: {}; {})", c.value_b, failed_runs(b), c.value_a, failed_runs(a), p);
  return fmt::format("{} better: {} had {} ({}: {}; {})", c.value_b, c.value_a, failed_runs(a), c.value_b,
                     failed_runs(b), p);
}

// The verdict in a few words and, when runs were left out, how many of each group.
std::string short_verdict(const ReportData& d, const GroupComparison& c) {
  if (std::string failed = c.identical ? "" : failure_verdict(d, c); !failed.empty()) return failed;
  std::string words = verdict_words(c, d.equivalence_pts);
  if (!c.bad_runs_p) return words;
  return fmt::format("{} (A: {}; B: {})", words, ok_of_ended(d.groups[c.a]), ok_of_ended(d.groups[c.b]));
}

std::string ratio_cell(double b, double a) {
  return std::isfinite(b / a) && a > 0 ? fmt::format("{}\xC3\x97", fixed(b / a, 2)) : kDash;
}

// Which of a and b (NaN: not reached) is first by value: " (A first)", " (B first)" or "".
const char* first_by_value(double va, double vb) {
  return !std::isfinite(vb) || va < vb ? " (A first)" : !std::isfinite(va) || vb < va ? " (B first)" : "";
}

// "12.3 s -> 7.1 s (B first)" for a's and b's times to the target; `first` says who was first.
std::string arrow_cell(const std::string& a, const std::string& b, double va, double vb, const char* first) {
  if (!std::isfinite(va) && !std::isfinite(vb)) return kDash;
  return fmt::format("{} \xE2\x86\x92 {}{}", std::isfinite(va) ? a : "not reached",
                     std::isfinite(vb) ? b : "not reached", first);
}

double time_to_target(const GroupStats& g) {
  return g.target_reached > 0 ? g.target_wall_s : std::numeric_limits<double>::quiet_NaN();
}

// Whether a reached the target accuracy before b beyond the spread of their runs: a's slowest run
// that reached it got there before b's fastest (a group that never reached it is later than any).
bool first_beyond_spread(const GroupStats& a, const GroupStats& b) {
  if (a.target_reached == 0) return false;
  return b.target_reached == 0 || a.target_wall_s_max < b.target_wall_s_min;
}

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

namespace {
const char* first_by_time(const GroupStats& a, const GroupStats& b) {
  if (first_beyond_spread(a, b)) return " (A first)";
  if (first_beyond_spread(b, a)) return " (B first)";
  return a.target_reached > 0 && b.target_reached > 0 ? " (within the spread of the runs)" : "";
}
double steps_to_loss(const GroupStats& g) {
  return g.target_loss_reached > 0 ? g.target_loss_steps : std::numeric_limits<double>::quiet_NaN();
}

// The speed cells of a change whose runs are identical: their times differ by the host's load.
constexpr const char* kIdenticalSpeed = "\xE2\x80\x94 (identical runs: host load)";

// The summary: per swept setting, what each change between neighbouring values did.
Table summary_table(const ReportData& d) {
  const std::string metric = d.final_epochs > 1 ? fmt::format("acc (last {} epochs)", d.final_epochs) : "final acc";
  Table t = {{"setting", "change A \xE2\x86\x92 B", "in effect (from the records)", "other settings",
              fmt::format("{} B \xE2\x88\x92 A (95% CI)", metric), "verdict", "images/s B / A", "time to target",
              "steps to target loss"}};
  for (const auto& change : summary_changes(d)) {
    const GroupComparison& c = d.comparisons[change.comparison];
    const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
    const double ta = time_to_target(a), tb = time_to_target(b), sa = steps_to_loss(a), sb = steps_to_loss(b);
    const std::string setting = c.planned.empty() ? c.key : fmt::format("{} (planned: {})", c.planned, c.key);
    const std::string time =
        arrow_cell(fmt::format("{} s", fixed(ta, 1)), fmt::format("{} s", fixed(tb, 1)), ta, tb, first_by_time(a, b));
    t.push_back(
        {setting, fmt::format("{} \xE2\x86\x92 {}", c.value_a, c.value_b), effective_change(a.effective, b.effective),
         change.at.empty() ? kDash : change.at, fmt::format("{} ({})", diff_cell(c.stats), ci_cell(c)),
         short_verdict(d, c), c.identical ? kIdenticalSpeed : ratio_cell(b.images_per_s, a.images_per_s),
         c.identical ? kIdenticalSpeed : time, arrow_cell(fixed(sa, 0), fixed(sb, 0), sa, sb, first_by_value(sa, sb))});
  }
  return t;
}

// "A (12.3 s, 11.0-13.1 over 3 runs)": a group's time to the target accuracy and its spread.
std::string time_with_spread(const GroupStats& g) {
  if (g.target_reached < 2) return fmt::format("{} ({} s, one run)", g.label, fixed(g.target_wall_s, 1));
  return fmt::format("{} ({} s, {}\xE2\x80\x93{} over {} runs)", g.label, fixed(g.target_wall_s, 1),
                     fixed(g.target_wall_s_min, 1), fixed(g.target_wall_s_max, 1), g.target_reached);
}

// "; A and B are identical runs to it ...": the groups that trained as the fastest did.
std::string identical_clause(const Recommendation& r) {
  if (r.identical.empty()) return "";
  std::vector<std::string> labels;
  for (const GroupStats* g : r.identical) labels.push_back(g->label);
  return fmt::format(
      "; {} trained bit-identically to it (identical runs), so {} the same pick: which of them ran faster is the "
      "host's load, not the setting",
      fmt::join(labels, " and "), labels.size() == 1 ? "it is" : "they are");
}

// The line on who reached the target accuracy first: the fastest group, unless another group's
// runs reached it within the spread of the fastest one's (then no group is named first).
std::string first_to_target(const ReportData& d, const Recommendation& r) {
  const GroupStats& fastest = *r.fastest;
  std::vector<std::string> inside;
  for (const GroupStats* g : r.uncertain) inside.push_back(time_with_spread(*g));
  if (!inside.empty())
    return fmt::format(
        "No group is first to reach {} {} accuracy beyond the spread of its runs: {} and {} overlap (mean seconds, "
        "fastest to slowest run).",
        pct(*d.target_acc), chosen_set(d), time_with_spread(fastest), fmt::join(inside, ", "));
  return fmt::format(
      "First to reach {} {} accuracy: {} ({} s, epoch {}; mean over its {} of {} runs that reached "
      "it{}){}.",
      pct(*d.target_acc), chosen_set(d), fastest.label, fixed(fastest.target_wall_s, 1),
      fixed(fastest.target_epochs, 1), fastest.target_reached, fastest.n,
      fastest.target_reached < 2 ? "; one run, so no spread to weigh the margin against" : "", identical_clause(r));
}

// The recommendation at the target: the fastest group, the cheapest in device-seconds near its
// time, and whether the spread of the runs leaves the pick uncertain.
std::string recommendation_line(const ReportData& d, const Recommendation& r) {
  const GroupStats &fastest = *r.fastest, &cheapest = *r.cheapest;
  std::string o = fmt::format("Recommendation at {} {} accuracy{}: {} is fastest ({} s, {} device-s)",
                              pct(*d.target_acc), chosen_set(d), d.target_chosen ? " (the report's target)" : "",
                              fastest.label, fixed(fastest.target_wall_s, 1), fixed(fastest.target_device_s, 1));
  if (&cheapest == &fastest)
    o += fmt::format(
        " and the cheapest in device-seconds (wall \xC3\x97 replicas) of the groups within {:.0f}% of its time",
        100 * kCheapestWithin);
  else
    o += fmt::format("; within {:.0f}% of its time, {} is cheapest ({} s, {} device-s, wall \xC3\x97 replicas)",
                     100 * kCheapestWithin, cheapest.label, fixed(cheapest.target_wall_s, 1),
                     fixed(cheapest.target_device_s, 1));
  o += identical_clause(r);
  if (!r.uncertain.empty())
    return o + fmt::format(
                   ". Uncertain: {} other group{} reached it within the spread of the fastest one's runs, so other "
                   "seeds could pick another.",
                   r.uncertain.size(), r.uncertain.size() == 1 ? "" : "s");
  if (fastest.target_reached < 2) return o + ". Uncertain: one run reached it, so there is no spread to weigh.";
  return o + ". Its slowest run reached the target before every other group's fastest.";
}

// "Not recommended, though they reached the target: 1 x 256 (2 of 3 runs collapsed)."
std::string left_out_line(const Recommendation& r) {
  std::vector<std::string> groups;
  for (const GroupStats* g : r.left_out) groups.push_back(fmt::format("{} ({})", g->label, failed_runs(*g)));
  return fmt::format("Not recommended, though {} reached the target: {}.", r.left_out.size() == 1 ? "it" : "they",
                     fmt::join(groups, ", "));
}

// Which group reached the target accuracy first (wall clock), the recommendation, which groups
// with failed runs it leaves out, and which reached the target loss in the fewest steps.
std::vector<std::string> firsts(const ReportData& d) {
  std::vector<std::string> out;
  const Recommendation r = recommend(d);
  const GroupStats* fewest = nullptr;
  for (const auto& g : d.groups)
    if (std::isfinite(steps_to_loss(g)) && (!fewest || steps_to_loss(g) < steps_to_loss(*fewest))) fewest = &g;
  if (r.fastest) {
    out.push_back(first_to_target(d, r));
    out.push_back(recommendation_line(d, r));
  } else if (d.target_acc) {
    out.push_back(fmt::format("No group {}reached {} {} accuracy.", r.left_out.empty() ? "" : "without failed runs ",
                              pct(*d.target_acc), chosen_set(d)));
  }
  if (!r.left_out.empty()) out.push_back(left_out_line(r));
  if (fewest)
    out.push_back(fmt::format("Fewest steps to training loss {:g}: {} ({} steps, {} samples).", *d.target_loss,
                              fewest->label, fixed(fewest->target_loss_steps, 0),
                              fixed(fewest->target_loss_samples, 0)));
  return out;
}

// The heading of the time-to-target table.
std::string target_title(const ReportData& d) {
  return fmt::format("Time to {} {} accuracy", pct(*d.target_acc), chosen_set(d));
}

// Runs measured at evaluation points (RunData::reaching), over the groups.
int runs_at_points(const ReportData& d) {
  int n = 0;
  for (const auto& g : d.groups) n += g.target_at_points;
  return n;
}

// Where each run's time to target is read: the first epoch at it, or the first evaluation point.
std::string target_rule(const ReportData& d) {
  const std::string epochs =
      fmt::format("the first epoch whose {} accuracy is at or above the target (epoch granularity)", chosen_set(d));
  const int points = runs_at_points(d);
  if (points == 0) return epochs;
  return fmt::format(
      "the first evaluation point at or above the target where a run has points on the {} set ({} of the runs that "
      "reached it; steps.jsonl's eval_acc, log.eval_every_steps: every few steps, on a fixed subset of the set whose "
      "accuracy it is), else {}",
      chosen_set(d), points, epochs);
}

// Under the time-to-target table: where the target came from and what the columns are.
std::string target_note(const ReportData& d) {
  const std::string source =
      d.target_chosen
          ? fmt::format(
                "No report.target_acc is set, so the report chose the target: the highest {} accuracy that every "
                "group's mean curve (per epoch, the mean over its finished runs) reached, rounded down to 0.1 points; "
                "here the peak of {}. Where one group lags far behind, it sets a low target: set report.target_acc.",
                chosen_set(d), d.target_set_by)
          : std::string("The target is report.target_acc (or --target).");
  return fmt::format(
      "{} Each column is the mean over the runs that reached it, at {}. The recommendation names the fastest group on "
      "mean wall time and the group with the fewest device-seconds (wall \xC3\x97 replicas) among those within "
      "{:.0f}% of its time; it is flagged uncertain when another group's runs reached the target within the spread of "
      "the fastest one's. See docs/report.md.",
      source, target_rule(d), 100 * kCheapestWithin);
}

// " A change whose runs are identical ...", when the report has one.
std::string identical_speed_note(const ReportData& d) {
  if (std::none_of(d.comparisons.begin(), d.comparisons.end(), [](const GroupComparison& c) { return c.identical; }))
    return "";
  return " A change whose runs are identical (the same records, bit for bit, for every shared seed) trained nothing "
         "differently: its images/s and time to target are not compared, since the difference is the host's load, "
         "and the recommendation counts such groups once.";
}

// Below the summary table: what its columns mean.
std::string summary_note(const ReportData& d) {
  return fmt::format(
             "Each row changes one swept setting (keys that always change together, a sweep_zip's, count as one) "
             "between "
             "neighbouring values with the other settings fixed; the accuracy difference is the comparison below "
             "(paired "
             "by seed where possible, Holm-corrected). In effect: the global batch, optimizer steps per epoch and "
             "learning "
             "rate (at the first epoch and its peak) read from the runs' records. Time to target: wall-clock seconds "
             "to the "
             "first epoch{} at the target accuracy; steps to target loss: the first step record (log.every_steps) from "
             "which the training loss, averaged over {:.0f} samples around each record, stays at or below "
             "report.target_loss.",
             runs_at_points(d) > 0 ? " (or evaluation point, where runs have them)" : "", kLossWindowSamples) +
         identical_speed_note(d);
}

// The x of a per-epoch chart.
enum class EpochX { kEpoch, kSteps, kSamples, kWall };

double x_of_record(EpochX x, const rundir::EpochRecord& e) {
  switch (x) {
    case EpochX::kEpoch:
      return e.epoch;
    case EpochX::kSteps:
      return static_cast<double>(e.step);
    case EpochX::kSamples:  // in thousands
      return static_cast<double>(e.step) * static_cast<double>(e.global_batch) / 1000;
    case EpochX::kWall:
      return e.wall_s;
  }
  return std::nan("");
}

struct ChartDef {
  const char* id;
  const char* title;
  const char* x_label;
  const char* y_label;
  double (*y)(const rundir::EpochRecord&);  // in the record's units
  EpochX x;
  bool percent;     // an accuracy: drawn in percent, like the tables
  bool validation;  // drawn only when the runs have a validation split
};
const char* const kAtEpochs = "Each point is an epoch, at the mean over the group's runs of x and of y.";
double test_acc(const rundir::EpochRecord& e) { return e.test_acc; }
double test_loss(const rundir::EpochRecord& e) { return e.test_loss; }
const ChartDef kCharts[] = {
    {"test_acc", "Test accuracy vs epoch", "epoch", "test accuracy (%)", test_acc, EpochX::kEpoch, true, false},
    {"val_acc", "Validation accuracy vs epoch", "epoch", "validation accuracy (%)",
     [](const rundir::EpochRecord& e) { return or_nan(e.val_acc); }, EpochX::kEpoch, true, true},
    {"test_acc_steps", "Test accuracy vs optimizer steps", "optimizer steps (mean over seeds)", "test accuracy (%)",
     test_acc, EpochX::kSteps, true, false},
    {"test_acc_samples", "Test accuracy vs training samples seen",
     "training samples seen, thousands (steps \xC3\x97 global batch; mean over seeds)", "test accuracy (%)", test_acc,
     EpochX::kSamples, true, false},
    {"test_acc_wall", "Test accuracy vs wall-clock time", "wall-clock seconds (mean over seeds)", "test accuracy (%)",
     test_acc, EpochX::kWall, true, false},
    {"train_loss", "Training loss vs epoch", "epoch", "training loss",
     [](const rundir::EpochRecord& e) { return e.train_loss; }, EpochX::kEpoch, false, false},
    {"test_loss", "Test loss vs epoch", "epoch", "test loss", test_loss, EpochX::kEpoch, false, false},
    {"test_loss_samples", "Test loss vs training samples seen",
     "training samples seen, thousands (steps \xC3\x97 global batch; mean over seeds)", "test loss", test_loss,
     EpochX::kSamples, false, false},
    {"lr", "Learning rate vs epoch", "epoch", "learning rate (last step of the epoch)",
     [](const rundir::EpochRecord& e) { return e.lr; }, EpochX::kEpoch, false, false},
};

}  // namespace

namespace {
// One series per group, in the group's colour: at each epoch the mean over the group's runs of y
// (and of x), with the min..max band of y. x_of / y_of read run r's i-th record; non-finite values
// are left out.
using PointFn = std::function<double(const RunData&, size_t)>;
ChartSeries group_series(const ReportData& d, const GroupStats& g, const PointFn& x_of, const PointFn& y_of) {
  std::map<int, std::vector<double>> ys, xs;
  for (size_t ri : g.runs) {
    const RunData& r = d.runs[ri];
    for (size_t i = 0; i < r.epochs.size(); ++i) {
      const double y = y_of(r, i);
      if (!std::isfinite(y)) continue;
      ys[r.epochs[i].epoch].push_back(y);
      xs[r.epochs[i].epoch].push_back(x_of(r, i));
    }
  }
  ChartSeries s;
  s.colour = static_cast<int>(&g - d.groups.data());
  s.label = fmt::format("{}{}", g.label, g.n == 0 && g.in_progress > 0 ? " (in progress)" : "");
  for (const auto& [epoch, v] : ys) {
    const double x = mean(xs[epoch]);
    if (!std::isfinite(x)) continue;
    s.x.push_back(x);
    s.y.push_back(mean(v));
    s.lo.push_back(*std::min_element(v.begin(), v.end()));
    s.hi.push_back(*std::max_element(v.begin(), v.end()));
  }
  return s;
}

double epoch_of(const RunData& r, size_t i) { return r.epochs[i].epoch; }

// Bytes communicated up to and including record i (NaN when a record lacks the field).
double cumulative_comm_bytes(const RunData& r, size_t i) {
  double total = 0;
  for (size_t k = 0; k <= i; ++k) {
    const auto& bytes = r.epochs[k].comm_bytes;
    total += bytes ? static_cast<double>(*bytes) : std::numeric_limits<double>::quiet_NaN();
  }
  return total;
}

bool any_noise_scale(const ReportData& d) {
  return std::any_of(d.groups.begin(), d.groups.end(), [](const GroupStats& g) {
    return std::isfinite(g.noise_scale_last) || !g.noise_scale_unreliable.empty();
  });
}

// The training loss of each log.every_steps interval vs epochs done (steps.jsonl): per group the
// mean over its runs of the records at the same step, with the min..max band.
ChartSeries steps_series(const ReportData& d, const GroupStats& g) {
  std::map<int64_t, std::vector<double>> ys, xs;
  for (size_t ri : g.runs)
    for (const auto& r : d.runs[ri].steps)
      if (std::isfinite(r.train_loss)) ys[r.step].push_back(r.train_loss), xs[r.step].push_back(r.epoch);
  ChartSeries s;
  s.label = g.label;
  s.colour = static_cast<int>(&g - d.groups.data());
  s.markers = false;
  for (const auto& [step, v] : ys) {
    s.x.push_back(mean(xs[step]));
    s.y.push_back(mean(v));
    s.lo.push_back(*std::min_element(v.begin(), v.end()));
    s.hi.push_back(*std::max_element(v.begin(), v.end()));
  }
  return s;
}

bool any_steps(const ReportData& d) {
  return std::any_of(d.runs.begin(), d.runs.end(), [](const RunData& r) { return !r.steps.empty(); });
}

bool any_comm_bytes(const ReportData& d) {
  return std::any_of(d.groups.begin(), d.groups.end(), [](const GroupStats& g) { return g.comm_bytes > 0; });
}
}  // namespace

std::vector<NamedChart> render_charts(const ReportData& d) {
  std::vector<NamedChart> out;
  for (const auto& def : kCharts) {
    if (def.validation && !d.on_validation) continue;
    LineChart chart = line_chart(def.id, def.title, def.x_label, def.y_label);
    chart.integer_x = def.x == EpochX::kEpoch;
    if (def.percent) chart.y_floor = 0, chart.y_ceil = 100;
    const PointFn x_of = [&](const RunData& r, size_t i) { return x_of_record(def.x, r.epochs[i]); };
    const PointFn y_of = [&](const RunData& r, size_t i) { return (def.percent ? 100 : 1) * def.y(r.epochs[i]); };
    for (const auto& g : d.groups) chart.series.push_back(group_series(d, g, x_of, y_of));
    out.push_back({fmt::format("{}.svg", def.id), def.title, render_svg(chart),
                   def.x == EpochX::kEpoch ? std::string() : std::string(kAtEpochs)});
  }
  if (any_steps(d)) {
    LineChart chart = line_chart("steps_train_loss", "Training loss per step interval (log.every_steps) vs epoch",
                                 "epochs done", "training loss over the interval, all replicas");
    for (const auto& g : d.groups) chart.series.push_back(steps_series(d, g));
    out.push_back({"steps_train_loss.svg", chart.title, render_svg(chart), ""});
  }
  if (any_noise_scale(d)) {
    LineChart chart =
        line_chart("noise_scale", "Gradient noise scale B_simple vs epoch (dotted: the group's global batch)", "epoch",
                   "B_simple (samples, log scale)");
    chart.log_y = true;
    chart.integer_x = true;
    for (const auto& g : d.groups) {
      if (!std::isfinite(g.noise_scale_last) && g.noise_scale_unreliable.empty()) continue;
      auto s =
          group_series(d, g, epoch_of, [](const RunData& r, size_t i) { return or_nan(r.epochs[i].grad_noise_scale); });
      s.label += fmt::format(" (global batch {})", g.global_batch);
      s.reference_y = static_cast<double>(g.global_batch);
      chart.series.push_back(std::move(s));
    }
    out.push_back({"noise_scale.svg", chart.title, render_svg(chart), ""});
  }
  if (any_comm_bytes(d)) {
    LineChart chart = line_chart("test_acc_comm", "Test accuracy vs bytes communicated per rank",
                                 "MB sent by rank 0 so far (gradient and parameter collectives)", "test accuracy (%)");
    chart.y_floor = 0, chart.y_ceil = 100;
    for (const auto& g : d.groups)
      chart.series.push_back(group_series(
          d, g, [](const RunData& r, size_t i) { return cumulative_comm_bytes(r, i) / 1e6; },
          [](const RunData& r, size_t i) { return 100 * r.epochs[i].test_acc; }));
    out.push_back({"test_acc_comm.svg", chart.title, render_svg(chart), kAtEpochs});
  }
  return out;
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

namespace {
// What the comparisons table is, under it.
std::string comparisons_note(const ReportData& d) {
  const std::string metric = d.final_epochs > 1
                                 ? fmt::format("the mean test accuracy of the last {} epochs", d.final_epochs)
                                 : std::string("the final test accuracy");
  const auto identical =
      std::count_if(d.comparisons.begin(), d.comparisons.end(), [](const GroupComparison& c) { return c.identical; });
  return fmt::format(
      "Groups that differ in one setting, compared on {} in points: paired by seed over the seeds both groups ran, "
      "else Welch's unequal-variance t. p values are corrected for {} comparison{} (Holm); a verdict is \"better\" or "
      "\"worse\" when the adjusted p < 0.05, \"equivalent\" when the 90% interval lies within \xC2\xB1{:g} points "
      "(report.equivalence_pts), else \"can't tell\".{} See docs/report.md.",
      metric, holm_family(d), holm_family(d) == 1 ? "" : "s", d.equivalence_pts,
      identical == 0 ? std::string()
                     : fmt::format(" {} comparison{} of identical runs (the same records for every shared seed) {} no "
                                   "verdict and {} not counted.",
                                   identical, identical == 1 ? "" : "s", identical == 1 ? "has" : "have",
                                   identical == 1 ? "is" : "are"));
}

// The names of the settings made of several keys (a sweep_zip's), as the comparisons name them.
std::vector<std::string> joined_settings(const ReportData& d) {
  std::vector<std::string> out;
  for (const auto& s : d.settings)
    if (s.keys.size() > 1) out.push_back(s.name);
  return out;
}
constexpr const char* kJoinedNote = "keys that always change together: compared as one setting";

// The opening paragraph of the HTML report: what a group is and which keys the groups differ in.
std::string html_intro(const ReportData& d) {
  std::string o = fmt::format(
      "<p>{} runs in {} groups. A group is the runs whose resolved specs differ only in the seed; mean \xC2\xB1 "
      "standard deviation are over its finished runs (n).",
      d.runs.size(), d.groups.size());
  if (!d.differing_keys.empty()) {
    o += " Groups differ in: ";
    for (size_t i = 0; i < d.differing_keys.size(); ++i)
      o += fmt::format("{}<code>{}</code>", i ? ", " : "", escape_html(d.differing_keys[i]));
    o += '.';
  }
  for (const auto& f : d.follower_notes) o += fmt::format(" <code>{}</code> (left out of the labels).", escape_html(f));
  for (const auto& n : joined_settings(d)) o += fmt::format(" <code>{}</code> ({}).", escape_html(n), kJoinedNote);
  return o + "</p>\n";
}

std::string html_warnings(const ReportData& d) {
  if (d.warnings.empty()) return "";
  std::string o = "<h2>Warnings</h2>\n<ul class=\"warnings\">\n";
  for (const auto& w : d.warnings) o += fmt::format("<li>{}</li>\n", escape_html(w));
  return o + "</ul>\n";
}

// A chart linked from Markdown, with its caption.
std::string md_figure(const NamedChart& c) {
  return fmt::format("![{}]({})\n\n{}", c.title, c.file, c.caption.empty() ? "" : md_cell(c.caption) + "\n\n");
}

// A chart with its caption.
std::string html_figure(const NamedChart& c, const char* cls) {
  const std::string caption =
      c.caption.empty() ? std::string() : fmt::format("<figcaption>{}</figcaption>\n", escape_html(c.caption));
  return fmt::format("<figure{}>\n{}{}</figure>\n", *cls ? fmt::format(" class=\"{}\"", cls) : "", c.svg, caption);
}

// The arms' colours, the same in every chart.
std::string html_colour_key(const ReportData& d) {
  std::string o = "<p class=\"colour-key\">Colours, the same in every chart:";
  for (size_t i = 0; i < d.groups.size(); ++i) {
    // Past the palette a colour repeats and the group's lines are dashed: so is its swatch.
    const std::string fill =
        palette_repeats(i) ? fmt::format("repeating-linear-gradient(90deg,{} 0 6px,#ffffff 6px 9px)", palette_colour(i))
                           : palette_colour(i);
    o += fmt::format(" <span class=\"arm\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>", fill,
                     escape_html(d.groups[i].label));
  }
  return o + " (grey: a line over several groups).</p>\n";
}

// The answer first: what each swept setting did, then the charts against the swept settings.
std::string html_summary(const ReportData& d, const std::vector<NamedChart>& charts) {
  std::string o = "<h2 id=\"summary\">Summary: what each swept setting did</h2>\n";
  for (const auto& line : firsts(d)) o += fmt::format("<p class=\"first\">{}</p>\n", escape_html(line));
  const Table t = summary_table(d);
  if (t.size() > 1)
    o += html_table(t, "summary") + fmt::format("<p class=\"note\">{}</p>\n", escape_html(summary_note(d)));
  else
    o += "<p>No two groups differ in exactly one swept setting.</p>\n";
  if (d.target_acc)
    o += fmt::format("<h3 id=\"to-target\">{}</h3>\n{}<p class=\"note\">{}</p>\n", escape_html(target_title(d)),
                     html_table(target_table(d), "to-target"), escape_html(target_note(d)));
  if (charts.empty()) return o;
  o += "<h2 id=\"axis-charts\">Against the swept settings</h2>\n";
  for (const auto& c : charts) o += html_figure(c, "axis");
  return o;
}

// B_crit per line and target, with its interval over seeds, or why the model refuses.
Table critical_batch_table(const ReportData& d) {
  Table t = {{"line", "target training loss", "seeds", "B_crit (fit on the mean over seeds)",
              "95% interval (resampled seeds)", "each seed's own fit", "note"}};
  for (const auto& [line, e] : critical_batch_estimates(d)) {
    std::vector<std::string> per_seed;
    for (double b : e.per_seed) per_seed.push_back(fixed(b, 0));
    std::string note = e.fit ? std::string() : fmt::format("no fit: {}", e.refusal);
    if (e.seeds_refused > 0)
      note += fmt::format("{}{} of {} seeds refused on their own", note.empty() ? "" : "; ", e.seeds_refused, e.seeds);
    if (e.resamples_refused > 0)
      note += fmt::format("{}{} of {} resamples refused", note.empty() ? "" : "; ", e.resamples_refused, e.resamples);
    const std::string interval =
        std::isfinite(e.low) ? fmt::format("{}\xE2\x80\x93{}", fixed(e.low, 0), fixed(e.high, 0)) : kDash;
    t.push_back({line, fmt::format("{:.3g}", e.target), fmt::format("{}", e.seeds),
                 e.fit ? fixed(e.fit->b_crit, 0) : kDash, interval,
                 per_seed.empty() ? kDash : fmt::format("{}", fmt::join(per_seed, ", ")), note.empty() ? kDash : note});
  }
  return t;
}

const char* const kCriticalBatchNote =
    "McCandlish et al.'s model of steps to a target, S = S_min (1 + B_crit / B), fitted by least squares of S on 1 / "
    "B, at report.target_loss and two easier targets (4/3 and 5/3 of it): B_crit moves with the target, so one "
    "target does not measure it. Steps to a target are read from the curve (the windowed step records). The interval "
    "resamples the seeds with replacement (2000 times) and fits each resample's mean steps. The model needs the "
    "samples to the target, S x B, to grow with B; where they fall (an lr tuned for another batch, most often) the fit "
    "is refused and the reason given. See docs/report.md.";

// The groups, their comparisons and, when logged, the noise scale.
std::string html_tables(const ReportData& d) {
  std::string o = fmt::format("<h2>Groups</h2>\n{}", html_table(groups_table(d), "groups"));
  o += fmt::format(
      "<p class=\"note\">{} Test-set SE is the sampling error sqrt(p (1 - p) / n_test) the test set alone "
      "puts on the final accuracy p, in points: seeds cannot shrink it.</p>\n",
      escape_html(best_note(d)));
  o += "<p class=\"note\">Scaling efficiency is thr(N) / (N \xC3\x97 thr(1)) against the 1-replica group with the "
       "same per-replica batch. Time to target is the first epoch whose accuracy (the set that chooses) reaches the "
       "target (mean over "
       "the runs that reached it).</p>\n";
  o += "<h2>Which differences are real?</h2>\n";
  if (d.comparisons.empty()) {
    o += "<p>No two groups differ in exactly one setting.</p>\n";
  } else {
    o += html_table(comparisons_table(d), "significance");
    o += fmt::format("<p class=\"note\">{}</p>\n", escape_html(comparisons_note(d)));
  }
  if (any_noise_scale(d)) {
    o += fmt::format("<h2>Gradient noise scale: how many replicas pay off?</h2>\n{}",
                     html_table(noise_scale_table(d), "noise-scale"));
    o += fmt::format("<p class=\"note\">{}</p>\n", escape_html(kNoiseScaleNote));
  }
  if (const Table t = critical_batch_table(d); t.size() > 1)
    o += fmt::format(
        "<h2>Critical batch: steps to a training loss against the global batch</h2>\n{}<p class=\"note\">{}</p>\n",
        html_table(t, "critical-batch"), escape_html(kCriticalBatchNote));
  return o;
}
}  // namespace

ReportCharts report_charts(const ReportData& d) { return {render_charts(d), axis_charts(d)}; }

std::string render_html(const ReportData& d) { return render_html(d, report_charts(d)); }
std::string render_markdown(const ReportData& d) { return render_markdown(d, report_charts(d)); }

std::string render_html(const ReportData& d, const ReportCharts& charts) {
  std::string o = html_page_start(fmt::format("ddplab report: {}", d.title));
  o += fmt::format("<h1>ddplab report: {}</h1>\n", escape_html(d.title));
  o += html_intro(d);
  o += html_colour_key(d);
  o += html_warnings(d);
  o += html_summary(d, charts.axis);
  o += html_tables(d);
  o += "<h2>Charts</h2>\n<p class=\"note\">Lines are the mean over a group's runs; the shaded band spans the "
       "minimum to maximum over seeds.</p>\n";
  for (const auto& c : charts.epochs) o += html_figure(c, "");
  o += fmt::format("<h2>Runs</h2>\n{}<p class=\"note\">{}</p>\n", html_table(runs_table(d), "runs"),
                   escape_html(best_note(d)));
  return o + html_page_end();
}

std::string render_markdown(const ReportData& d, const ReportCharts& charts) {
  std::string o = fmt::format("# ddplab report: {}\n\n", md_cell(d.title));
  o += fmt::format(
      "{} runs in {} groups (runs whose resolved specs differ only in the seed); mean \xC2\xB1 std over finished runs.",
      d.runs.size(), d.groups.size());
  for (const auto& f : d.follower_notes) o += fmt::format(" `{}` (left out of the labels).", f);
  for (const auto& n : joined_settings(d)) o += fmt::format(" `{}` ({}).", n, kJoinedNote);
  o += "\n\n";
  if (!d.warnings.empty()) {
    o += "## Warnings\n\n";
    for (const auto& w : d.warnings) o += fmt::format("- {}\n", md_cell(w));
    o += "\n";
  }
  o += "## Summary: what each swept setting did\n\n";
  for (const auto& line : firsts(d)) o += fmt::format("{}\n\n", md_cell(line));
  if (const Table t = summary_table(d); t.size() > 1)
    o += fmt::format("{}\n{}\n\n", md_table(t), summary_note(d));
  else
    o += "No two groups differ in exactly one swept setting.\n\n";
  if (d.target_acc)
    o += fmt::format("### {}\n\n{}\n{}\n\n", target_title(d), md_table(target_table(d)), target_note(d));
  for (const auto& c : charts.axis) o += md_figure(c);
  o += fmt::format("## Groups\n\n{}\n\\{}\n\n", md_table(groups_table(d)), best_note(d));  // \* : not a list item
  o += "## Which differences are real?\n\n";
  if (d.comparisons.empty())
    o += "No two groups differ in exactly one setting.\n\n";
  else
    o += fmt::format("{}\n{}\n\n", md_table(comparisons_table(d)), comparisons_note(d));
  if (any_noise_scale(d))
    o += fmt::format("## Gradient noise scale: how many replicas pay off?\n\n{}\n{}\n\n",
                     md_table(noise_scale_table(d)), kNoiseScaleNote);
  if (const Table t = critical_batch_table(d); t.size() > 1)
    o += fmt::format("## Critical batch: steps to a training loss against the global batch\n\n{}\n{}\n\n", md_table(t),
                     kCriticalBatchNote);
  o += "## Charts\n\n";
  for (const auto& c : charts.epochs) o += md_figure(c);
  o += fmt::format("## Runs\n\n{}\n\\{}\n", md_table(runs_table(d)), best_note(d));
  return o;
}

namespace {
// A CSV file's columns: each its header and its cell of one row, so that the order is written once.
template <typename Row>
using CsvColumns = std::vector<std::pair<std::string, std::function<std::string(const Row&)>>>;

template <typename Row>
std::string render_csv(const CsvColumns<Row>& columns, const std::vector<Row>& rows) {
  std::string o;
  for (size_t i = 0; i < columns.size(); ++i) o += fmt::format("{}{}", i > 0 ? "," : "", columns[i].first);
  o += '\n';
  for (const Row& row : rows) {
    for (size_t i = 0; i < columns.size(); ++i) o += fmt::format("{}{}", i > 0 ? "," : "", columns[i].second(row));
    o += '\n';
  }
  return o;
}

template <typename T>
std::string csv_int(T v) {
  return fmt::format("{}", v);
}
template <typename T>
std::string csv_optional(const std::optional<T>& v) {
  if constexpr (std::is_floating_point_v<T>)
    return v ? csv_num(*v) : "";
  else
    return v ? csv_int(*v) : "";
}

// Where the run reached its group's target, if it did.
std::optional<TargetPoint> target_point(const ReportData& d, const RunData& r) {
  const GroupStats& g = d.groups[r.group];
  return g.target_acc ? r.reaching(*g.target_acc, d.on_validation) : std::nullopt;
}

CsvColumns<RunData> summary_columns(const ReportData& d) {
  return {
      {"experiment", [](const RunData& r) { return csv_field(r.experiment); }},
      {"run_id", [](const RunData& r) { return csv_field(r.run_id); }},
      {"group", [&](const RunData& r) { return csv_field(d.groups[r.group].label); }},
      {"status", [](const RunData& r) { return csv_field(r.status_name); }},
      {"message", [](const RunData& r) { return csv_field(r.message); }},
      {"seed",
       [](const RunData& r) {
         return r.spec.is_object() && r.spec.contains("seed") ? r.spec["seed"].dump() : std::string();
       }},
      {"replicas", [](const RunData& r) { return csv_int(r.replicas()); }},
      {"per_replica_batch", [](const RunData& r) { return csv_int(r.per_replica_batch()); }},
      {"epochs", [](const RunData& r) { return csv_int(r.epochs.size()); }},
      {"final_test_acc", [](const RunData& r) { return csv_num(r.final_test_acc()); }},
      {"best_test_acc", [](const RunData& r) { return csv_num(r.best_test_acc()); }},
      {"final_train_loss", [](const RunData& r) { return csv_num(r.final_train_loss()); }},
      {"final_test_loss", [](const RunData& r) { return csv_num(r.final_test_loss()); }},
      {"images_per_s", [](const RunData& r) { return csv_num(r.mean_images_per_s()); }},
      {"target_epoch",
       [&](const RunData& r) {
         const auto t = target_point(d, r);
         return !t ? "" : t->point ? csv_num(t->epoch) : csv_int(static_cast<int>(t->epoch));
       }},
      {"target_wall_s",
       [&](const RunData& r) {
         const auto t = target_point(d, r);
         return t ? csv_num(t->wall_s) : "";
       }},
      {"host_cpu_wait_pct", [](const RunData& r) { return csv_num(r.mean_host_cpu_wait_pct()); }},
      {"host_steal_pct", [](const RunData& r) { return csv_num(r.mean_host_steal_pct()); }},
      {"dir", [](const RunData& r) { return csv_field(r.dir.string()); }},
  };
}

// groups.csv's columns after the group's label and its values of the differing keys.
CsvColumns<GroupStats> groups_stats_columns() {
  using G = const GroupStats&;
  return {
      {"n", [](G g) { return csv_int(g.n); }},
      {"in_progress", [](G g) { return csv_int(g.in_progress); }},
      {"final_test_acc_mean", [](G g) { return csv_num(g.final_test_acc.mean); }},
      {"final_test_acc_std", [](G g) { return csv_num(g.final_test_acc.std); }},
      {"best_test_acc_mean", [](G g) { return csv_num(g.best_test_acc.mean); }},
      {"best_test_acc_std", [](G g) { return csv_num(g.best_test_acc.std); }},
      {"final_train_loss_mean", [](G g) { return csv_num(g.final_train_loss.mean); }},
      {"final_train_loss_std", [](G g) { return csv_num(g.final_train_loss.std); }},
      {"final_test_loss_mean", [](G g) { return csv_num(g.final_test_loss.mean); }},
      {"final_test_loss_std", [](G g) { return csv_num(g.final_test_loss.std); }},
      {"target_acc", [](G g) { return csv_optional(g.target_acc); }},
      {"target_reached", [](G g) { return g.target_acc ? csv_int(g.target_reached) : ""; }},
      {"target_epochs_mean", [](G g) { return csv_num(g.target_epochs); }},
      {"target_wall_s_mean", [](G g) { return csv_num(g.target_wall_s); }},
      {"images_per_s", [](G g) { return csv_num(g.images_per_s); }},
      {"replicas", [](G g) { return csv_int(g.replicas); }},
      {"per_replica_batch", [](G g) { return csv_int(g.per_replica_batch); }},
      {"global_batch", [](G g) { return csv_int(g.global_batch); }},
      {"grad_noise_scale_first", [](G g) { return csv_num(g.noise_scale_first); }},
      {"grad_noise_scale_last", [](G g) { return csv_num(g.noise_scale_last); }},
      {"comm_bytes", [](G g) { return csv_num(g.comm_bytes); }},
      {"scaling_efficiency", [](G g) { return csv_optional(g.scaling_efficiency); }},
      {"test_samples", [](G g) { return csv_optional(g.test_samples); }},
      {"test_set_se_pts", [](G g) { return csv_num(g.test_sampling_error_pts); }},
      {"collapsed", [](G g) { return csv_int(g.collapsed); }},
      {"diverged", [](G g) { return csv_int(g.diverged); }},
      {"target_steps_mean", [](G g) { return csv_num(g.target_steps); }},
      {"target_samples_mean", [](G g) { return csv_num(g.target_samples); }},
      {"target_device_s_mean", [](G g) { return csv_num(g.target_device_s); }},
      {"steps_per_epoch", [](G g) { return csv_num(g.effective.steps_per_epoch); }},
      {"lr_first", [](G g) { return csv_num(g.effective.lr_first); }},
      {"lr_peak", [](G g) { return csv_num(g.effective.lr_peak); }},
      {"chosen_val_acc_mean", [](G g) { return csv_num(g.chosen_val_acc.mean); }},
      {"chosen_test_acc_mean", [](G g) { return csv_num(g.chosen_test_acc.mean); }},
  };
}

CsvColumns<GroupStats> groups_columns(const ReportData& d) {
  CsvColumns<GroupStats> columns = {{"group", [](const GroupStats& g) { return csv_field(g.label); }}};
  for (const auto& k : d.differing_keys)
    columns.push_back({csv_field(k), [k](const GroupStats& g) {
                         const auto& v = g.values.contains(k) ? g.values[k] : nlohmann::json();
                         return csv_field(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump());
                       }});
  for (auto& column : groups_stats_columns()) columns.push_back(std::move(column));
  return columns;
}

CsvColumns<GroupComparison> comparisons_columns(const ReportData& d) {
  using C = const GroupComparison&;
  const auto a = [&](C c) -> const GroupStats& { return d.groups[c.a]; };
  const auto b = [&](C c) -> const GroupStats& { return d.groups[c.b]; };
  const std::string metric =
      d.final_epochs > 1 ? fmt::format("test_acc_last_{}_epochs", d.final_epochs) : std::string("final_test_acc");
  return {
      {"key", [](C c) { return csv_field(c.key); }},
      {"value_a", [](C c) { return csv_field(c.value_a); }},
      {"value_b", [](C c) { return csv_field(c.value_b); }},
      {"group_a", [=](C c) { return csv_field(a(c).label); }},
      {"group_b", [=](C c) { return csv_field(b(c).label); }},
      {"metric", [=](C) { return metric; }},
      {"a_mean_pts", [=](C c) { return csv_num(a(c).metric.mean); }},
      {"b_mean_pts", [=](C c) { return csv_num(b(c).metric.mean); }},
      {"diff_pts", [](C c) { return csv_num(c.stats.diff); }},
      {"ci95_low", [](C c) { return csv_num(c.stats.ci_low); }},
      {"ci95_high", [](C c) { return csv_num(c.stats.ci_high); }},
      {"n_pairs", [](C c) { return csv_int(c.stats.n_pairs); }},
      {"n_a", [](C c) { return csv_int(c.stats.n_a); }},
      {"n_b", [](C c) { return csv_int(c.stats.n_b); }},
      {"method", [](C c) { return csv_field(method_cell(c)); }},
      {"p", [](C c) { return csv_num(c.stats.p); }},
      {"p_adjusted", [](C c) { return csv_num(c.stats.p_adjusted); }},
      {"m", [](C c) { return csv_int(c.stats.m); }},
      {"verdict", [](C c) { return csv_field(verdict_text(c)); }},
      {"sentence", [](C c) { return csv_field(c.sentence); }},
      {"borderline", [](C c) { return std::string(c.stats.borderline ? "true" : "false"); }},
      {"equivalence_seeds", [](C c) { return csv_optional(c.stats.equivalence_seeds); }},
      {"ci90_low", [](C c) { return csv_num(c.stats.ci90_low); }},
      {"ci90_high", [](C c) { return csv_num(c.stats.ci90_high); }},
      {"bad_runs_p", [](C c) { return csv_optional(c.bad_runs_p); }},
      {"effective", [=](C c) { return csv_field(effective_change(a(c).effective, b(c).effective)); }},
  };
}
}  // namespace

std::string render_summary_csv(const ReportData& d) { return render_csv(summary_columns(d), d.runs); }
std::string render_groups_csv(const ReportData& d) { return render_csv(groups_columns(d), d.groups); }
std::string render_comparisons_csv(const ReportData& d) { return render_csv(comparisons_columns(d), d.comparisons); }

ReportSummary write_report(const ReportOptions& options) {
  ReportSummary summary;
  summary.data = analyze(options);
  const ReportData& d = summary.data;
  for (const auto& w : d.warnings) fmt::print(stderr, "warning: {}\n", w);
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (!fs::is_directory(options.out_dir))
    throw Error(fmt::format("{}: cannot create the report directory{}", options.out_dir.string(),
                            ec ? fmt::format(": {}", ec.message()) : ""));
  auto put = [&](const std::string& name, const std::string& text) {
    const fs::path file = options.out_dir / name;
    rundir::write_file_atomic(file, text);
    summary.files.push_back(file);
  };
  const ReportCharts charts = report_charts(d);
  put("report.html", render_html(d, charts));
  put("report.md", render_markdown(d, charts));
  put("summary.csv", render_summary_csv(d));
  put("groups.csv", render_groups_csv(d));
  put("comparisons.csv", render_comparisons_csv(d));
  for (const auto& c : charts.epochs) put(c.file, c.svg);
  for (const auto& c : charts.axis) put(c.file, c.svg);
  summary.runs = d.runs.size();
  summary.groups = d.groups.size();
  summary.warnings = d.warnings;
  return summary;
}

}  // namespace ddplab::report
