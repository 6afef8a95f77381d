// Honest comparisons with few seeds: group B against group A on one metric (e.g. final test
// accuracy in points), from per-seed values keyed by seed.
//
// Pairing: when at least two seeds are present in both groups, the comparison is paired over
// exactly those seeds (d_s = B_s - A_s; runs of a seed the other group lacks are left out, and
// n_pairs says how many pairs remain); a seed-to-seed spread common to both groups (the same data
// order and initialisation) then cancels. Otherwise it falls back to Welch's unequal-variance test
// over all values. Either way: the mean difference B - A, its 95% t interval (paired: n - 1 df;
// Welch: Welch-Satterthwaite df), the two-sided p and a verdict, in this order:
//   b_better / b_worse: the (Holm-adjusted) p < alpha = 0.05, i.e. for one comparison the 95%
//                       interval excludes 0;
//   equivalent:         the 90% interval lies inside (-delta, +delta), delta = 0.5 points by
//                       default (two one-sided tests at 5% each);
//   cant_tell:          neither; seeds_needed then estimates how many seeds would resolve it.
// Zero spread is decided without a t statistic: identical values give a zero-width interval at 0,
// so no difference is "equivalent"; a constant nonzero difference has no interval (NaN) and the
// exact p of its signs (sign test over n pairs, 2 / 2^n; Welch: permutation test, 2 / C(n_a + n_b,
// n_a)), so 2 seeds that moved by the same amount are "can't tell" (p = 0.5), 6 are "better/worse".
// All functions are pure; nothing here reads files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddplab::report {

// One group's values of the metric, by seed.
using SeedValues = std::map<int64_t, double>;

enum class CompareMethod {
  paired,   // over the seeds present in both groups (at least 2)
  welch,    // fewer than 2 seeds in common; every value of both groups
  too_few,  // neither is possible: fewer than 2 pairs and a group with fewer than 2 values
};

enum class Verdict { b_better, b_worse, equivalent, cant_tell };

// An equivalence verdict whose 90% interval ends closer than this fraction of the margin to it
// is marked borderline.
constexpr double kBorderlineFraction = 0.1;

struct CompareOptions {
  double delta = 0.5;    // equivalence margin, in the metric's units
  double alpha = 0.05;   // better/worse level (95% interval); equivalence uses a 1 - 2 alpha (90%) one
  int max_seeds = 1000;  // seeds_needed gives up (nullopt) above this
};

struct Comparison {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  CompareOptions options;
  CompareMethod method = CompareMethod::too_few;
  size_t n_pairs = 0;                        // paired: seeds in both groups; welch: 0
  size_t n_a = 0, n_b = 0;                   // values used from each group (paired: n_pairs each)
  double diff = kNaN;                        // mean of B - A (paired: mean of the per-seed differences)
  double sd_diff = kNaN;                     // paired: sample std of the per-seed differences
  double sd_a = kNaN, sd_b = kNaN;           // sample std of the values used from each group
  double se = kNaN, df = kNaN;               // standard error of diff and the t interval's degrees of freedom
  double ci_low = kNaN, ci_high = kNaN;      // 1 - alpha (95%) interval of diff
  double ci90_low = kNaN, ci90_high = kNaN;  // 1 - 2 alpha (90%) interval, for equivalence
  double p = kNaN;                           // two-sided p of "no difference"
  double p_adjusted = kNaN;                  // Holm-adjusted over the m comparisons of a report (= p while m == 1)
  size_t m = 1;                              // size of the Holm family; 0 when nothing is tested (no p)
  bool within_delta = false;                 // the 90% interval lies inside (-delta, +delta)
  Verdict verdict = Verdict::cant_tell;
  // cant_tell with a spread estimate: about how many seeds (pairs for paired, per group for Welch)
  // would give a verdict if the observed difference and spread held; see seeds_to_resolve.
  std::optional<int> seeds_needed;
  // equivalent only: the 90% interval's nearer end lies within kBorderlineFraction x delta of the
  // margin, so a rerun with other seeds undoes such a verdict often (at 5 seeds and a spread
  // that puts the interval's end 0.02 points inside a 0.5 margin, about half the time).
  bool borderline = false;
  // equivalent or cant_tell: the seeds (pairs; per group for Welch) at which an equivalence test
  // at this spread passes about 80% of the time when the true difference is 0:
  // seeds_for_effect(delta, sd, 2 alpha, 0.9), sd the paired differences' spread (Welch:
  // sqrt(sd_a^2 + sd_b^2)). nullopt without a spread or above max_seeds.
  std::optional<int> equivalence_seeds;
  // The test set's own sampling error of one accuracy, in points, when the caller knows it
  // (test_set_sampling_error_points); describe() shows it beside the difference.
  std::optional<double> resolution_floor;
};

// Compares B against A (verdict for a single comparison, m = 1; m = 0 when too_few: no p).
Comparison compare_by_seed(const SeedValues& a, const SeedValues& b, const CompareOptions& options = {});

// Holm's correction over the comparisons of one report: sets m and p_adjusted on each (those
// without a p, too_few, do not count in m, and get m = 0) and re-decides the verdicts with the adjusted p, so a
// difference whose 95% interval excludes 0 but whose adjusted p >= alpha becomes cant_tell.
void adjust_for_multiple_comparisons(std::vector<Comparison>& comparisons);

// The smallest n >= 2 with (t_{1 - alpha/2, n-1} + t_{power, n-1}) * sd / sqrt(n) < effect: the
// seeds (pairs, with sd the spread of the per-seed differences) at which a true difference of
// `effect` reaches p < alpha with probability about `power` (the usual t approximation of the
// noncentral t; power 0.5 drops the second term: the interval's half-width falls below the
// effect). 0 spread: 2. nullopt when effect <= 0 or more than max_seeds would be needed.
std::optional<int> seeds_for_effect(double effect, double sd, double alpha = 0.05, double power = 0.5,
                                    int max_seeds = 1000);

// The rule behind Comparison::seeds_needed: the smallest n at which, were the observed mean
// difference and spread to stay as they are, the verdict would no longer be cant_tell. That is
// either the 95% half-width falls below |diff| (better/worse; at level alpha / m with m > 1, Holm's
// strictest step) or the 90% interval fits inside (-delta, +delta) (equivalent). Paired: n pairs,
// sd_diff, n - 1 df. Welch: n seeds per group, se^2 = (sd_a^2 + sd_b^2) / n with the
// Welch-Satterthwaite df at that n. nullopt without a spread estimate or above max_seeds.
std::optional<int> seeds_to_resolve(const Comparison& c);

// sqrt(p (1 - p) / n_test) in percentage points, for an accuracy p in [0, 1] measured on n_test
// examples: the standard error the test set alone puts on one accuracy, the floor below which a
// difference is not resolved by that test set however many seeds agree.
double test_set_sampling_error_points(double accuracy, int64_t n_test);

// "B better", "B worse", "equivalent", "can't tell".
std::string_view verdict_name(Verdict v);

// The verdict as a sentence, with the groups named a and b, e.g.
// "B better than A by 1.20 points (95% CI 0.40 to 2.00, paired over 5 seeds, p = 0.01)".
std::string describe(const Comparison& c, std::string_view a = "A", std::string_view b = "B");

}  // namespace ddplab::report
