#include "ddplab/report/tables.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/report/cells.h"

namespace ddplab::report {

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

std::string best_note(const ReportData& d) {
  return d.on_validation ? "* chosen on the validation set: each run's epoch of highest validation accuracy, whose "
                           "test accuracy is reported beside it (the test set chose nothing)."
                         : "* best over epochs: optimistic, chosen on the test set (no validation split).";
}

namespace {
// The target's heading: "time to 84.30% (chosen)".
std::string target_heading(const ReportData& d) {
  if (!d.target_acc) return "time to target (none: no finished runs)";
  return fmt::format("time to {} {} acc{}", pct(*d.target_acc), chosen_set(d), d.target_chosen ? " (chosen)" : "");
}
}  // namespace

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

Table target_table(const ReportData& d) {
  Table t = {{"group", "reached", "epoch", "optimizer steps", "samples (steps \xC3\x97 global batch)",
              "wall-clock s (fastest\xE2\x80\x93slowest run)", "device-s (wall \xC3\x97 replicas)"}};
  for (const auto& g : d.groups) {
    if (g.n + g.collapsed + g.diverged == 0) continue;
    const std::string reached = g.collapsed + g.diverged == 0
                                    ? fmt::format("{}/{}", g.target_reached, g.n)
                                    : fmt::format("{}/{} ({})", g.target_reached, g.n, failed_runs(g));
    const std::string wall = g.target_reached > 1
                                 ? fmt::format("{} ({}\xE2\x80\x93{})", fixed(g.target_wall_s, 1),
                                               fixed(g.target_wall_s_min, 1), fixed(g.target_wall_s_max, 1))
                                 : fixed(g.target_wall_s, 1);
    t.push_back({g.label, reached, fixed(g.target_epochs, 1), fixed(g.target_steps, 0), fixed(g.target_samples, 0),
                 wall, fixed(g.target_device_s, 1)});
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
    if (const std::string stop = early_stop_text(r); !stop.empty()) status += fmt::format(", {}", stop);
    if (const std::string poor = poor_text(r); !poor.empty()) status += fmt::format(" ({})", poor);
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

std::vector<std::string> joined_settings(const ReportData& d) {
  std::vector<std::string> out;
  for (const auto& s : d.settings)
    if (s.keys.size() > 1) out.push_back(s.name);
  return out;
}

const char* const kJoinedNote = "keys that always change together: compared as one setting";

Table critical_batch_table(const ReportData& d) {
  Table t = {{"line", "target training loss", "seeds", "B_crit (fit on the mean over seeds)",
              "bootstrap 95% interval (seeds resampled)", "each seed's own fit", "note"}};
  for (const auto& [line, e] : critical_batch_estimates(d)) {
    std::vector<std::string> per_seed;
    for (double b : e.per_seed) per_seed.push_back(fixed(b, 0));
    std::string note = e.fit ? std::string() : fmt::format("no fit: {}", e.refusal);
    if (e.seeds_refused > 0)
      note += fmt::format("{}{} of {} seeds refused on their own", note.empty() ? "" : "; ", e.seeds_refused, e.seeds);
    if (!e.interval_refusal.empty())
      note += fmt::format("{}no interval: {}", note.empty() ? "" : "; ", e.interval_refusal);
    else if (e.resamples_refused > 0)
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
    "resamples the seeds with replacement (2000 times) and fits each resample's mean steps; it is given from 5 seeds "
    "on, and only when the model accepts 95% of the resamples or more. The model needs the "
    "samples to the target, S x B, to grow with B; where they fall (an lr tuned for another batch, most often) the fit "
    "is refused and the reason given. See docs/report.md.";

}  // namespace ddplab::report
