// Small statistics for the comparison report: mean, sample standard deviation, the Student t
// distribution (through the regularized incomplete beta function) and Welch's unequal-variance
// t-test. No dependencies beyond <cmath>; every function is pure.
#pragma once
#include <vector>

namespace ddplab::report {

// Arithmetic mean; NaN for an empty sample.
double mean(const std::vector<double>& xs);
// Sample standard deviation (divides by n - 1); 0 for n == 1, NaN for n == 0.
double sample_std(const std::vector<double>& xs);

// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1
// (continued fraction, accurate to ~1e-12).
double regularized_incomplete_beta(double a, double b, double x);
// P(T <= t) for Student's t with `df` > 0 degrees of freedom (df need not be an integer).
double student_t_cdf(double t, double df);

struct WelchResult {
  double t = 0;   // (mean(a) - mean(b)) / sqrt(var(a)/na + var(b)/nb); +-inf when both variances are 0
  double df = 0;  // Welch-Satterthwaite degrees of freedom
  double p = 1;   // two-sided p-value
  bool valid = false;  // false when either sample has fewer than 2 values (t, df, p then meaningless)
};

// Welch's two-sample t-test (two-sided), as scipy.stats.ttest_ind(a, b, equal_var=False).
// Both variances zero: p = 1 when the means are equal, else 0.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace ddplab::report
