#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/report/analysis.h"
#include "ddplab/report/cells.h"
#include "ddplab/report/tables.h"

namespace ddplab::report {

namespace {
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

// When one group's runs failed (collapsed or diverged) more often than the other's, that decides,
// in words as strong as Fisher's test allows: "256 worse: 6 of 6 runs collapsed (64: 0 of 6 runs
// collapsed; Fisher's exact p = 0.0022)" below kFailureAlpha, else "256 failed more often: 2 of 3
// runs collapsed (64: 0 of 3 runs collapsed; Fisher's exact p = 0.4: too few runs to call it
// worse)"; "" when the shares are equal.
constexpr double kFailureAlpha = 0.05;
std::string failure_verdict(const ReportData& d, const GroupComparison& c) {
  const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
  if (!c.bad_runs_p || failed_share(a) == failed_share(b)) return "";
  const bool beyond_chance = *c.bad_runs_p < kFailureAlpha;
  const bool b_worse = failed_share(b) > failed_share(a);
  const std::string p = fmt::format("Fisher's exact p = {:.2g}{}", *c.bad_runs_p,
                                    beyond_chance ? ""
                                    : b_worse     ? ": too few runs to call it worse"
                                                  : ": too few runs to call it better");
  if (b_worse)
    return fmt::format("{} {}: {} ({}: {}; {})", c.value_b, beyond_chance ? "worse" : "failed more often",
                       failed_runs(b), c.value_a, failed_runs(a), p);
  return fmt::format("{} {}: {} had {} ({}: {}; {})", c.value_b, beyond_chance ? "better" : "failed less often",
                     c.value_a, failed_runs(a), c.value_b, failed_runs(b), p);
}

// The verdict in a few words and, when runs were left out, how many of each group.
std::string short_verdict(const ReportData& d, const GroupComparison& c) {
  if (std::string failed = c.identical ? "" : failure_verdict(d, c); !failed.empty()) return failed;
  std::string words = verdict_words(c, d.equivalence_pts);
  if (!c.bad_runs_p) return words;
  return fmt::format("{} (A: {}; B: {})", words, ok_of_ended(d.groups[c.a]), ok_of_ended(d.groups[c.b]));
}

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
}  // namespace

Table summary_table(const ReportData& d) {
  const std::string metric = d.final_epochs > 1 ? fmt::format("acc (last {} epochs)", d.final_epochs) : "final acc";
  Table t = {{"setting", "change A \xE2\x86\x92 B", "in effect (from the runs)", "other settings",
              fmt::format("{} B \xE2\x88\x92 A (95% CI)", metric), "verdict", "images/s B / A", "time to target",
              "steps to target loss"}};
  for (const auto& change : summary_changes(d)) {
    const GroupComparison& c = d.comparisons[change.comparison];
    const GroupStats &a = d.groups[c.a], &b = d.groups[c.b];
    const double ta = time_to_target(a), tb = time_to_target(b), sa = steps_to_loss(a), sb = steps_to_loss(b);
    const std::string setting = c.planned.empty() ? c.key : fmt::format("{} (planned: {})", c.planned, c.key);
    const std::string time =
        arrow_cell(fmt::format("{} s", fixed(ta, 1)), fmt::format("{} s", fixed(tb, 1)), ta, tb, first_by_time(a, b));
    t.push_back({setting, fmt::format("{} \xE2\x86\x92 {}", c.value_a, c.value_b),
                 effective_change(a.effective, b.effective), change.at.empty() ? kDash : change.at,
                 fmt::format("{} ({})", diff_cell(c.stats), ci_cell(c)), short_verdict(d, c),
                 c.identical ? kIdenticalSpeed : speed_ratio_cell(a, b), c.identical ? kIdenticalSpeed : time,
                 arrow_cell(fixed(sa, 0), fixed(sb, 0), sa, sb, first_by_value(sa, sb))});
  }
  return t;
}

namespace {
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

// "Early stopping ended 2 of 6 finished runs before their last epoch: RUN (stopped early after
// epoch 5 of 10: val_loss best at epoch 3), ..."; "" when it ended none.
std::string early_stops_line(const ReportData& d) {
  std::vector<std::string> stopped;
  int finished = 0;
  for (const RunData& r : d.runs) {
    if (!r.finished()) continue;
    ++finished;
    if (const std::string stop = early_stop_text(r); !stop.empty())
      stopped.push_back(fmt::format("{} ({})", r.run_id, stop));
  }
  if (stopped.empty()) return "";
  return fmt::format("Early stopping (early_stop.patience) ended {} of {} finished runs before their last epoch: {}.",
                     stopped.size(), finished, fmt::join(stopped, ", "));
}

// Why there is no time to target and which target to give.
std::string no_target_line(const ReportData& d) {
  const std::string best = d.chosen.set_by.empty() ? std::string()
                                                   : fmt::format(" ({}'s mean curve peaked at {})", d.chosen.set_by,
                                                                 pct(d.chosen.best_peak));
  return fmt::format(
      "No time to target and no recommendation: no report.target_acc is set and the report chose none, since {}. "
      "Give the {} accuracy you need with --target or report.target_acc{}.",
      d.chosen.refusal, chosen_set(d), best);
}

// "Not recommended, though they reached the target: 1 x 256 (2 of 3 runs collapsed)."
std::string left_out_line(const Recommendation& r) {
  std::vector<std::string> groups;
  for (const GroupStats* g : r.left_out) groups.push_back(fmt::format("{} ({})", g->label, failed_runs(*g)));
  return fmt::format("Not recommended, though {} reached the target: {}.", r.left_out.size() == 1 ? "it" : "they",
                     fmt::join(groups, ", "));
}
}  // namespace

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
  } else if (!d.chosen.refusal.empty()) {
    out.push_back(no_target_line(d));
  }
  if (!r.left_out.empty()) out.push_back(left_out_line(r));
  if (std::string stops = early_stops_line(d); !stops.empty()) out.push_back(std::move(stops));
  if (fewest)
    out.push_back(fmt::format("Fewest steps to training loss {:g}: {} ({} steps, {} samples).", *d.target_loss,
                              fewest->label, fixed(fewest->target_loss_steps, 0),
                              fixed(fewest->target_loss_samples, 0)));
  return out;
}

std::string target_title(const ReportData& d) {
  return fmt::format("Time to {} {} accuracy", pct(*d.target_acc), chosen_set(d));
}

namespace {
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
}  // namespace

std::string target_note(const ReportData& d) {
  const std::string source =
      d.target_chosen
          ? fmt::format(
                "No report.target_acc is set, so the report chose the target from what the best group reliably "
                "reaches: {} (the highest mean curve of the groups with {}+ finished runs, none collapsed or "
                "diverged) peaked at {} or more in each of its {} runs; less the equivalence margin of {:g} points, "
                "rounded down to 0.1 points, that is {}, the accuracy of a configuration as good as the best within "
                "the margin. Set report.target_acc for another.",
                d.chosen.set_by, kChosenTargetRuns, pct(d.chosen.reliable), d.chosen.runs, d.equivalence_pts,
                pct(*d.target_acc))
          : std::string("The target is report.target_acc (or --target).");
  return fmt::format(
      "{} Each column is the mean over the runs that reached it, at {}. The recommendation names the fastest group on "
      "mean wall time and the group with the fewest device-seconds (wall \xC3\x97 replicas) among those within "
      "{:.0f}% of its time; it is flagged uncertain when another group's runs reached the target within the spread of "
      "the fastest one's. See docs/report.md.",
      source, target_rule(d), 100 * kCheapestWithin);
}

namespace {
// " A change whose runs are identical ...", when the report has one.
std::string identical_speed_note(const ReportData& d) {
  if (std::none_of(d.comparisons.begin(), d.comparisons.end(), [](const GroupComparison& c) { return c.identical; }))
    return "";
  return " A change whose runs are identical (the same records, bit for bit, for every shared seed) trained nothing "
         "differently: its images/s and time to target are not compared, since the difference is the host's load, "
         "and the recommendation counts such groups once.";
}
}  // namespace

std::string summary_note(const ReportData& d) {
  return fmt::format(
             "Each row changes one swept setting (keys that always change together, a sweep_zip's, count as one) "
             "between neighbouring values with the other settings fixed; the accuracy difference is the comparison "
             "below (paired by seed where possible, Holm-corrected). In effect: the global batch and optimizer steps "
             "per epoch read from the runs' records, and the learning rate as each run scheduled it (the spec's, "
             "after the scale rule, and its peak over the steps; from the records, at epoch ends, for runs written "
             "before ddplab recorded the schedule). Time to target: wall-clock seconds to the first epoch{} at the "
             "target accuracy; steps to target loss: the first step record (log.every_steps) from "
             "which the training loss, averaged over {:.0f} samples around each record, stays at or below "
             "report.target_loss.",
             runs_at_points(d) > 0 ? " (or evaluation point, where runs have them)" : "", kLossWindowSamples) +
         identical_speed_note(d);
}

}  // namespace ddplab::report
