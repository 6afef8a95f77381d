// Small statistics for the comparison report: mean, sample standard deviation, the Student t
// distribution (through the regularized incomplete beta function) and its quantiles, Welch's
// unequal-variance t-test and Holm's step-down correction for several tests. No dependencies
// beyond the standard library; every function is pure.
#pragma once
#include <cstddef>
#include <vector>

namespace ddplab::report {

// Arithmetic mean; NaN for an empty sample.
double mean(const std::vector<double>& xs);
// Sample standard deviation (divides by n - 1); 0 for n == 1, NaN for n == 0.
double sample_std(const std::vector<double>& xs);
// The q-quantile (0 <= q <= 1) of the finite values of `xs`, interpolated linearly between the
// sorted values (q = 0.5: the median, the mean of the middle two for an even count); NaN when
// none is finite.
double percentile(const std::vector<double>& xs, double q);

// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1
// (continued fraction, accurate to ~1e-12).
double regularized_incomplete_beta(double a, double b, double x);
// P(T <= t) for Student's t with `df` > 0 degrees of freedom (df need not be an integer).
double student_t_cdf(double t, double df);
// The inverse of student_t_cdf: the t with P(T <= t) = p, for df > 0 (fractional df, as Welch's,
// is fine). -inf at p = 0, +inf at p = 1, NaN for p outside [0, 1] or df <= 0. Solved by bisection
// on the tail probability (not 1 - cdf), so far tails keep their relative accuracy (~1e-12).
double student_t_quantile(double p, double df);

// Fisher's exact test of a 2x2 table of counts: did group A's runs end badly (a_bad of a_bad +
// a_ok) as often as B's (b_bad of b_bad + b_ok)? The two-sided p: the probability, under fixed
// margins (hypergeometric), of every table no more likely than the observed one. 1 when a margin is 0.
double fisher_exact_two_sided(int a_bad, int a_ok, int b_bad, int b_ok);

struct WelchResult {
  double t = 0;        // (mean(a) - mean(b)) / sqrt(var(a)/na + var(b)/nb); +-inf when both variances are 0
  double df = 0;       // Welch-Satterthwaite degrees of freedom
  double p = 1;        // two-sided p-value
  bool valid = false;  // false when either sample has fewer than 2 values (t, df, p then meaningless)
};

// Welch's two-sample t-test (two-sided), as scipy.stats.ttest_ind(a, b, equal_var=False).
// Both variances zero: p = 1 when the means are equal, else 0.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

struct HolmResult {
  std::vector<double> adjusted;  // per input, in input order: monotone in the sorted p, capped at 1
  std::vector<bool> reject;      // adjusted < alpha
  size_t m = 0;                  // how many p-values took part (the non-NaN ones)
};

// Holm's step-down correction of m p-values for the family-wise error rate (as R's
// p.adjust(p, "holm")): with p sorted ascending, adjusted_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
// A NaN p (a comparison that could not be tested) stays NaN, never rejects and does not count in m.
HolmResult holm_adjust(const std::vector<double>& p, double alpha = 0.05);

}  // namespace ddplab::report
