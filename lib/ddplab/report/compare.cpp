#include "ddplab/report/compare.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "ddplab/report/stats.h"

namespace ddplab::report {

namespace {

// Values closer than this (relative, at least absolute) are equal: per-seed differences of accuracies
// read from files (85.64 - 84.12 and 86.02 - 84.50) can differ in the last bits where the
// accuracies moved by the same number of images.
constexpr double kRounding = 1e-9;

bool all_equal(const std::vector<double>& xs) {
  const double tol = kRounding * std::max(1.0, std::fabs(xs.front()));
  return std::all_of(xs.begin(), xs.end(), [&](double x) { return std::fabs(x - xs.front()) <= tol; });
}

// Two-sided p of a t statistic (t may be +-inf).
double two_sided_p(double t, double df) { return regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t)); }

// Two-sided p of an exact rank test when every value of B lies on one side of every value of A
// and nothing varies within a group: paired, the sign test over n_a = n_b pairs, 2 / 2^n; else the
// permutation test over n_a and n_b values, 2 / C(n_a + n_b, n_a).
double exact_separation_p(bool paired, size_t n_a, size_t n_b) {
  if (paired) return std::min(1.0, std::ldexp(2.0, -static_cast<int>(n_a)));
  double arrangements = 1;  // C(n_a + n_b, n_a)
  for (size_t k = 1; k <= n_a; ++k) arrangements *= static_cast<double>(n_b + k) / static_cast<double>(k);
  return std::min(1.0, 2 / arrangements);
}

// The intervals and p from diff, se and df. se == 0 (no spread) has no t statistic: no difference
// gives zero-width intervals at 0 and p = 1; a constant nonzero difference gives no interval (NaN)
// and the exact p of its signs, so that two seeds that happen to move by the same amount (accuracy
// on n test images moves in steps of 100 / n points) are not "significant" with p = 0.
void fill_intervals(Comparison& c) {
  if (c.se == 0) {
    const bool none = std::fabs(c.diff) <= kRounding;
    if (none) c.diff = 0;
    c.ci_low = c.ci_high = c.ci90_low = c.ci90_high = none ? 0.0 : Comparison::kNaN;
    c.p = none ? 1 : exact_separation_p(c.method == CompareMethod::paired, c.n_a, c.n_b);
    return;
  }
  const double h95 = student_t_quantile(1 - c.options.alpha / 2, c.df) * c.se;
  const double h90 = student_t_quantile(1 - c.options.alpha, c.df) * c.se;
  c.ci_low = c.diff - h95;
  c.ci_high = c.diff + h95;
  c.ci90_low = c.diff - h90;
  c.ci90_high = c.diff + h90;
  c.p = two_sided_p(c.diff / c.se, c.df);
}

void compare_paired(Comparison& c, const std::vector<double>& va, const std::vector<double>& vb) {
  std::vector<double> d(va.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = vb[i] - va[i];
  c.method = CompareMethod::paired;
  c.n_pairs = c.n_a = c.n_b = d.size();
  c.sd_a = sample_std(va);
  c.sd_b = sample_std(vb);
  c.df = static_cast<double>(d.size() - 1);
  c.diff = mean(d);
  if (all_equal(d)) {
    c.sd_diff = c.se = 0;
  } else {
    c.sd_diff = sample_std(d);
    c.se = c.sd_diff / std::sqrt(static_cast<double>(d.size()));
  }
  fill_intervals(c);
}

void compare_welch(Comparison& c, const std::vector<double>& va, const std::vector<double>& vb) {
  c.method = CompareMethod::welch;
  c.n_a = va.size();
  c.n_b = vb.size();
  if (all_equal(va) && all_equal(vb)) {
    c.diff = vb.front() - va.front();
    c.sd_a = c.sd_b = c.se = 0;
    c.df = static_cast<double>(c.n_a + c.n_b - 2);
  } else {
    const WelchResult w = welch_t_test(vb, va);
    c.diff = mean(vb) - mean(va);
    c.sd_a = sample_std(va);
    c.sd_b = sample_std(vb);
    c.se = std::sqrt(c.sd_a * c.sd_a / static_cast<double>(c.n_a) + c.sd_b * c.sd_b / static_cast<double>(c.n_b));
    c.df = w.df;
  }
  fill_intervals(c);
}

void decide(Comparison& c) {
  c.seeds_needed.reset();
  if (c.method == CompareMethod::too_few) {
    c.within_delta = false;
    c.verdict = Verdict::cant_tell;
    return;
  }
  c.within_delta = c.ci90_low > -c.options.delta && c.ci90_high < c.options.delta;
  if (c.p_adjusted < c.options.alpha)
    c.verdict = c.diff > 0 ? Verdict::b_better : Verdict::b_worse;
  else if (c.within_delta)
    c.verdict = Verdict::equivalent;
  else
    c.verdict = Verdict::cant_tell;
  if (c.verdict == Verdict::cant_tell) c.seeds_needed = seeds_to_resolve(c);
  const double room = c.options.delta - std::max(-c.ci90_low, c.ci90_high);  // between the interval and the margin
  c.borderline = c.verdict == Verdict::equivalent && room < kBorderlineFraction * c.options.delta;
  c.equivalence_seeds.reset();
  if (c.verdict == Verdict::equivalent || c.verdict == Verdict::cant_tell) {
    const double sd = c.method == CompareMethod::paired ? c.sd_diff : std::sqrt(c.sd_a * c.sd_a + c.sd_b * c.sd_b);
    if (std::isfinite(sd) && sd > 0)
      c.equivalence_seeds = seeds_for_effect(c.options.delta, sd, 2 * c.options.alpha, 0.9, c.options.max_seeds);
  }
}

// The smallest n in [2, max_n] with ok(n), for an ok that once true stays true as n grows.
std::optional<int> smallest_n(const std::function<bool(int)>& ok, int max_n) {
  if (max_n < 2 || !ok(max_n)) return std::nullopt;
  int lo = 1, hi = max_n;  // ok(hi) holds; ok(lo) is taken as false
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (ok(mid) ? hi : lo) = mid;
  }
  return hi;
}

// A number of points to 2 decimals, "+" signed if asked; never "-0.00".
std::string pts(double x, bool sign = false) {
  if (std::fabs(x) < 0.005) x = 0;
  return sign ? fmt::format("{:+.2f}", x) : fmt::format("{:.2f}", x);
}

std::string p_text(double p) { return p < 0.001 ? std::string("p < 0.001") : fmt::format("p = {:.2g}", p); }

std::string method_text(const Comparison& c) {
  if (c.method == CompareMethod::paired) return fmt::format("paired over {} seeds", c.n_pairs);
  return fmt::format("Welch over {} vs {} seeds", c.n_a, c.n_b);
}

// ", p = 0.01" or, within a Holm family, ", p = 0.01, Holm-adjusted p = 0.04 for 4 comparisons".
std::string p_clause(const Comparison& c) {
  if (c.m <= 1) return fmt::format(", {}", p_text(c.p));
  return fmt::format(", {}, Holm-adjusted {} for {} comparisons", p_text(c.p), p_text(c.p_adjusted), c.m);
}

// "95% CI lo to hi, paired over 5 seeds, p = ..." or, without a spread to form an interval from,
// "no spread between seeds, so no interval; paired over 2 seeds, exact sign test, p = ...".
std::string evidence_text(const Comparison& c, double lo, double hi, bool sign) {
  if (std::isfinite(lo) && std::isfinite(hi))
    return fmt::format("95% CI {} to {}, {}{}", pts(lo, sign), pts(hi, sign), method_text(c), p_clause(c));
  return fmt::format("no spread between seeds, so no interval; {}, exact {} test{}", method_text(c),
                     c.method == CompareMethod::paired ? "sign" : "permutation", p_clause(c));
}

std::string floor_clause(const Comparison& c) {
  if (!c.resolution_floor) return "";
  const double f = *c.resolution_floor;
  if (std::fabs(c.diff) < f && (c.verdict == Verdict::b_better || c.verdict == Verdict::b_worse))
    return fmt::format(
        "; smaller than the test set's own sampling error (±{:.2f} points): it holds on this "
        "test set but may not on new data",
        f);
  return fmt::format("; test-set resolution ±{:.2f} points", f);
}

std::string describe_too_few(const Comparison& c, std::string_view a, std::string_view b) {
  if (c.n_a == 0 || c.n_b == 0) return fmt::format("can't tell {} from {}: {} has no values", b, a, c.n_a == 0 ? a : b);
  return fmt::format(
      "can't tell {} from {}: difference {} points, but {} vs {} seeds ({} in common) give no "
      "seed-to-seed spread to judge it by (need 2 seeds in common or 2 in each group)",
      b, a, pts(c.diff, true), c.n_a, c.n_b, c.n_pairs);
}

// "; borderline: ..." for a borderline equivalence, with the seeds a claim at this spread needs.
std::string borderline_clause(const Comparison& c) {
  if (!c.borderline) return "";
  const double room = c.options.delta - std::max(-c.ci90_low, c.ci90_high);
  std::string s = fmt::format(
      "; borderline: the interval ends {} points inside the margin, so other seeds often undo it", pts(room, false));
  if (c.equivalence_seeds)
    s += fmt::format("; at this spread about {} {} make the claim hold 80% of the time when the true difference is 0",
                     *c.equivalence_seeds, c.method == CompareMethod::paired ? "seeds" : "seeds per group");
  return s;
}

std::string describe_cant_tell(const Comparison& c, std::string_view a, std::string_view b) {
  std::string s = fmt::format("can't tell {} from {}: difference {} points ({})", b, a, pts(c.diff, true),
                              evidence_text(c, c.ci_low, c.ci_high, true));
  if (c.m > 1 && c.p < c.options.alpha) s += fmt::format("; not significant once corrected for {} comparisons", c.m);
  const char* unit = c.method == CompareMethod::paired ? "seeds" : "seeds per group";
  if (c.seeds_needed)
    s += fmt::format("; about {} {} would tell", *c.seeds_needed, unit);
  else
    s += fmt::format("; more than {} {} would be needed", c.options.max_seeds, unit);
  return s;
}

}  // namespace

Comparison compare_by_seed(const SeedValues& a, const SeedValues& b, const CompareOptions& options) {
  Comparison c;
  c.options = options;
  std::vector<double> pa, pb;  // the values of the seeds in both groups, in seed order
  for (const auto& [seed, x] : a) {
    auto it = b.find(seed);
    if (it == b.end()) continue;
    pa.push_back(x);
    pb.push_back(it->second);
  }
  std::vector<double> va, vb;
  for (const auto& kv : a) va.push_back(kv.second);
  for (const auto& kv : b) vb.push_back(kv.second);
  if (pa.size() >= 2) {
    compare_paired(c, pa, pb);
  } else if (va.size() >= 2 && vb.size() >= 2) {
    compare_welch(c, va, vb);
  } else {
    c.n_pairs = pa.size();
    c.n_a = va.size();
    c.n_b = vb.size();
    c.diff = mean(vb) - mean(va);
  }
  c.p_adjusted = c.p;
  c.m = std::isnan(c.p) ? 0 : 1;
  decide(c);
  return c;
}

void adjust_for_multiple_comparisons(std::vector<Comparison>& comparisons) {
  std::vector<double> p;
  for (const Comparison& c : comparisons) p.push_back(c.p);
  const HolmResult holm = holm_adjust(p);
  for (size_t i = 0; i < comparisons.size(); ++i) {
    comparisons[i].m = std::isnan(comparisons[i].p) ? 0 : std::max<size_t>(holm.m, 1);
    comparisons[i].p_adjusted = holm.adjusted[i];
    decide(comparisons[i]);
  }
}

std::optional<int> seeds_for_effect(double effect, double sd, double alpha, double power, int max_seeds) {
  if (!(effect > 0) || !(sd >= 0)) return std::nullopt;
  return smallest_n(
      [&](int n) {
        const double df = n - 1;
        const double t = student_t_quantile(1 - alpha / 2, df) + student_t_quantile(power, df);
        return t * sd / std::sqrt(static_cast<double>(n)) < effect;
      },
      max_seeds);
}

std::optional<int> seeds_to_resolve(const Comparison& c) {
  if (c.method == CompareMethod::too_few || std::isnan(c.diff)) return std::nullopt;
  const double gap = std::fabs(c.diff), delta = c.options.delta, alpha = c.options.alpha;
  const double level = alpha / static_cast<double>(std::max<size_t>(c.m, 1));
  const double va = c.sd_a * c.sd_a, vb = c.sd_b * c.sd_b;
  auto resolves = [&](int n) {
    const double nn = n;
    double se = 0, df = nn - 1;
    if (c.method == CompareMethod::paired) {
      se = c.sd_diff / std::sqrt(nn);
    } else if (va + vb > 0) {
      se = std::sqrt((va + vb) / nn);
      df = (nn - 1) * (va + vb) * (va + vb) / (va * va + vb * vb);
    }
    if (se == 0) {  // no t statistic: the exact p of n seeds (per group) that all agree
      if (gap == 0) return delta > 0;
      const auto per_side = static_cast<size_t>(n);
      return exact_separation_p(c.method == CompareMethod::paired, per_side, per_side) < level;
    }
    if (gap > 0 && student_t_quantile(1 - level / 2, df) * se < gap) return true;
    return gap + student_t_quantile(1 - alpha, df) * se < delta;
  };
  return smallest_n(resolves, c.options.max_seeds);
}

double test_set_sampling_error_points(double accuracy, int64_t n_test) {
  TORCH_INTERNAL_ASSERT(accuracy >= 0 && accuracy <= 1 && n_test > 0,
                        "test_set_sampling_error_points: accuracy must be a fraction in [0, 1] and n_test > 0, got ",
                        accuracy, " and ", n_test);
  return 100 * std::sqrt(accuracy * (1 - accuracy) / static_cast<double>(n_test));
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::b_better:
      return "B better";
    case Verdict::b_worse:
      return "B worse";
    case Verdict::equivalent:
      return "equivalent";
    case Verdict::cant_tell:
      return "can't tell";
  }
  return "can't tell";
}

std::string describe(const Comparison& c, std::string_view a, std::string_view b) {
  std::string s;
  switch (c.verdict) {
    case Verdict::b_better:
      s = fmt::format("{} better than {} by {} points ({})", b, a, pts(c.diff),
                      evidence_text(c, c.ci_low, c.ci_high, false));
      break;
    case Verdict::b_worse:  // the interval of the shortfall A - B, so that it reads with "worse by"
      s = fmt::format("{} worse than {} by {} points ({})", b, a, pts(-c.diff),
                      evidence_text(c, -c.ci_high, -c.ci_low, false));
      break;
    case Verdict::equivalent:
      return fmt::format("{} equivalent to {} within ±{:g} points (difference {}, 90% CI {} to {}, {}){}{}", b, a,
                         c.options.delta, pts(c.diff, true), pts(c.ci90_low, true), pts(c.ci90_high, true),
                         method_text(c), borderline_clause(c), floor_clause(c));
    case Verdict::cant_tell:
      s = c.method == CompareMethod::too_few ? describe_too_few(c, a, b) : describe_cant_tell(c, a, b);
      return s + floor_clause(c);
  }
  if (c.within_delta)
    s += fmt::format("; inside the ±{:g}-point equivalence margin, so small in practice", c.options.delta);
  return s + floor_clause(c);
}

}  // namespace ddplab::report
