#include "ddplab/report/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Continued fraction for the incomplete beta function (modified Lentz).
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIter = 500;
  constexpr double kEps = 1e-15, kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIter; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}
}  // namespace

double mean(const std::vector<double>& xs) {
  if (xs.empty()) return kNaN;
  double s = 0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

double sample_std(const std::vector<double>& xs) {
  if (xs.empty()) return kNaN;
  if (xs.size() == 1) return 0;
  const double m = mean(xs);
  double s = 0;
  for (double x : xs) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(xs.size() - 1));
}

double regularized_incomplete_beta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || std::isnan(x)) return kNaN;
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  const double tail = 0.5 * regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p >= 0 && p <= 1) || !(df > 0)) return kNaN;
  if (p == 0) return -std::numeric_limits<double>::infinity();
  if (p == 1) return std::numeric_limits<double>::infinity();
  if (p == 0.5) return 0;
  // Find t >= 0 with P(T > t) = q, q the smaller tail; the tail falls as t grows.
  const double q = std::min(p, 1 - p);
  auto tail = [df](double t) { return 0.5 * regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t)); };
  double lo = 0, hi = 1;
  while (tail(hi) > q && hi < 1e300) {
    lo = hi;
    hi *= 2;
  }
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (tail(mid) > q ? lo : hi) = mid;
  }
  const double t = 0.5 * (lo + hi);
  return p < 0.5 ? -t : t;
}

WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  WelchResult r;
  if (a.size() < 2 || b.size() < 2) return r;
  r.valid = true;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double sa = sample_std(a), sb = sample_std(b);
  const double va = sa * sa / na, vb = sb * sb / nb;
  const double diff = mean(a) - mean(b);
  if (va + vb == 0) {
    r.t = diff == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    r.df = na + nb - 2;
    r.p = diff == 0 ? 1 : 0;
    return r;
  }
  r.t = diff / std::sqrt(va + vb);
  r.df = (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
  r.p = regularized_incomplete_beta(r.df / 2, 0.5, r.df / (r.df + r.t * r.t));
  return r;
}

HolmResult holm_adjust(const std::vector<double>& p, double alpha) {
  HolmResult r;
  r.adjusted.assign(p.size(), kNaN);
  r.reject.assign(p.size(), false);
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isnan(p[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&p](size_t a, size_t b) { return p[a] < p[b]; });
  r.m = order.size();
  double running = 0;  // the step-down maximum keeps the adjusted p monotone in the sorted order
  for (size_t j = 0; j < order.size(); ++j) {
    const double scaled = std::min(1.0, static_cast<double>(r.m - j) * p[order[j]]);
    running = std::max(running, scaled);
    r.adjusted[order[j]] = running;
    r.reject[order[j]] = running < alpha;
  }
  return r;
}

double percentile(const std::vector<double>& xs, double q) {
  std::vector<double> finite;
  for (double x : xs)
    if (std::isfinite(x)) finite.push_back(x);
  if (finite.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(finite.begin(), finite.end());
  const double at = q * static_cast<double>(finite.size() - 1);
  const auto i = static_cast<size_t>(at);
  if (i + 1 >= finite.size()) return finite[i];
  return finite[i] + (at - static_cast<double>(i)) * (finite[i + 1] - finite[i]);
}

double fisher_exact_two_sided(int a_bad, int a_ok, int b_bad, int b_ok) {
  const int bad = a_bad + b_bad, n_a = a_bad + a_ok, n = n_a + b_bad + b_ok;
  const auto log_choose = [](int k, int r) {
    return std::lgamma(k + 1.0) - std::lgamma(r + 1.0) - std::lgamma(k - r + 1.0);
  };
  // P(A has x of the bad runs) under fixed margins.
  const auto log_p = [&](int x) { return log_choose(n_a, x) + log_choose(n - n_a, bad - x) - log_choose(n, bad); };
  const double observed = log_p(a_bad);
  double p = 0;
  for (int x = std::max(0, bad - (n - n_a)); x <= std::min(bad, n_a); ++x)
    if (log_p(x) <= observed + 1e-9) p += std::exp(log_p(x));
  return std::min(1.0, p);
}

}  // namespace ddplab::report
