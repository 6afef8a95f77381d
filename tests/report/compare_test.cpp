#include "ddplab/report/compare.h"

#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "ddplab/report/stats.h"

using namespace ddplab::report;

namespace {

// B's values: A's plus a per-seed offset.
SeedValues shifted(const SeedValues& a, const std::vector<double>& offsets) {
  SeedValues b;
  size_t i = 0;
  for (const auto& [seed, x] : a) b[seed] = x + offsets.at(i++);
  return b;
}

SeedValues reseeded(const SeedValues& values, int64_t add) {
  SeedValues out;
  for (const auto& [seed, x] : values) out[seed + add] = x;
  return out;
}

}  // namespace

TEST(StatsTQuantile, KnownValues) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764451, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 10), 1.8124611, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.0422725, 1e-7);
  // Fractional df, as Welch's (scipy.stats.t.ppf(0.95, 4.5) = 2.065575888878524).
  EXPECT_NEAR(student_t_quantile(0.95, 4.5), 2.065575888878524, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.975, 3.7409326424870475), 2.8539434163007265, 1e-9);
}

TEST(StatsTQuantile, InvertsTheCdfIntoTheTails) {
  // df = 1 is Cauchy: the quantile is tan(pi (p - 1/2)); df = 2 has t = (2p - 1) / sqrt(2 p (1 - p)).
  for (double p : {0.6, 0.9, 0.9999, 1e-6})
    EXPECT_NEAR(student_t_quantile(p, 1) / std::tan(M_PI * (p - 0.5)), 1, 1e-9) << p;
  for (double p : {0.7, 0.975, 1 - 1e-9}) {
    const double exact = (2 * p - 1) / std::sqrt(2 * p * (1 - p));
    EXPECT_NEAR(student_t_quantile(p, 2) / exact, 1, 1e-8) << p;
  }
  for (double df : {0.7, 3.3, 17.25, 400.0})
    for (double p : {0.01, 0.3, 0.8, 0.999}) EXPECT_NEAR(student_t_cdf(student_t_quantile(p, df), df), p, 1e-11);
  EXPECT_NEAR(student_t_quantile(0.2, 6), -student_t_quantile(0.8, 6), 1e-12);
  EXPECT_EQ(student_t_quantile(0.5, 3), 0);
  EXPECT_EQ(student_t_quantile(1, 3), std::numeric_limits<double>::infinity());
  EXPECT_EQ(student_t_quantile(0, 3), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(student_t_quantile(1.5, 3)));
  EXPECT_TRUE(std::isnan(student_t_quantile(0.9, 0)));
}

TEST(StatsHolm, TextbookExample) {
  // Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> max(0.06, 0.04) = 0.06.
  const HolmResult h = holm_adjust({0.01, 0.04, 0.03, 0.005});
  ASSERT_EQ(h.adjusted.size(), 4u);
  EXPECT_EQ(h.m, 4u);
  EXPECT_NEAR(h.adjusted[0], 0.03, 1e-12);
  EXPECT_NEAR(h.adjusted[1], 0.06, 1e-12);
  EXPECT_NEAR(h.adjusted[2], 0.06, 1e-12);
  EXPECT_NEAR(h.adjusted[3], 0.02, 1e-12);
  EXPECT_EQ(h.reject, (std::vector<bool>{true, false, false, true}));
}

TEST(StatsHolm, CapsAtOneAndSkipsUntested) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Sorted: 0.02 x 3 = 0.06, 0.55 x 2 = 1.1 -> 1, 0.6 x 1 = 0.6 -> max(1, 0.6) = 1.
  const HolmResult h = holm_adjust({0.6, nan, 0.02, 0.55});
  EXPECT_EQ(h.m, 3u);  // the NaN does not count
  EXPECT_NEAR(h.adjusted[2], 0.06, 1e-12);
  EXPECT_EQ(h.adjusted[3], 1);
  EXPECT_EQ(h.adjusted[0], 1);
  EXPECT_TRUE(std::isnan(h.adjusted[1]));
  EXPECT_FALSE(h.reject[1]);
  EXPECT_EQ(holm_adjust({0.03}).adjusted[0], 0.03);
}

TEST(ComparePaired, WorkedExample) {
  // A over seeds 1..5, B = A + d with d = 1.0, 1.5, 0.5, 1.2, 0.8 (points). By hand:
  //   mean d = 5.0 / 5 = 1.0; deviations 0, 0.5, -0.5, 0.2, -0.2; sum of squares 0.58;
  //   sd = sqrt(0.58 / 4) = 0.3807887; se = sd / sqrt(5) = 0.1702939; t = 1.0 / se = 5.872202;
  //   df = 4, t_{0.975,4} = 2.7764451: 95% CI 1.0 -+ 0.4728116 = 0.5271884 to 1.4728116;
  //   t_{0.95,4} = 2.1318468: 90% CI 0.6369596 to 1.3630404; p = I_{4/(4+t^2)}(2, 1/2) = 0.0042007.
  // Seed 6 is only in A and is left out.
  const SeedValues a{{1, 85.0}, {2, 86.0}, {3, 84.5}, {4, 85.5}, {5, 86.5}, {6, 90.0}};
  SeedValues b = shifted(a, {1.0, 1.5, 0.5, 1.2, 0.8, 0});
  b.erase(6);
  const Comparison c = compare_by_seed(a, b);
  EXPECT_EQ(c.method, CompareMethod::paired);
  EXPECT_EQ(c.n_pairs, 5u);
  EXPECT_NEAR(c.diff, 1.0, 1e-12);
  EXPECT_NEAR(c.sd_diff, 0.38078865529319617, 1e-12);
  EXPECT_EQ(c.df, 4);
  EXPECT_NEAR(c.ci_low, 0.5271884357980151, 1e-9);
  EXPECT_NEAR(c.ci_high, 1.4728115642019848, 1e-9);
  EXPECT_NEAR(c.ci90_low, 0.6369595740268492, 1e-9);
  EXPECT_NEAR(c.ci90_high, 1.3630404259731506, 1e-9);
  EXPECT_NEAR(c.p, 0.00420072669346764, 1e-10);  // scipy.stats.ttest_rel(b, a)
  EXPECT_EQ(c.verdict, Verdict::b_better);
  EXPECT_EQ(describe(c), "B better than A by 1.00 points (95% CI 0.53 to 1.47, paired over 5 seeds, p = 0.0042)");
  // The same gap the other way round is "worse", and the interval then reads as the shortfall.
  const Comparison w = compare_by_seed(b, a);
  EXPECT_EQ(w.verdict, Verdict::b_worse);
  EXPECT_NEAR(w.diff, -1.0, 1e-12);
  EXPECT_EQ(describe(w, "lr=0.1", "lr=0.2"),
            "lr=0.2 worse than lr=0.1 by 1.00 points (95% CI 0.53 to 1.47, paired over 5 seeds, p = 0.0042)");
}

TEST(CompareWelch, DisjointSeedsFallBackToWelch) {
  // A = 85, 86, 87 (seeds 1-3), B = 86.5, 88, 87.5, 89 (seeds 4-7): no seed in common. By hand:
  //   mean A = 86, s_A^2 = 2 / 2 = 1; mean B = 87.75, s_B^2 = 3.25 / 3 = 1.0833333; diff = 1.75;
  //   v_A = 1 / 3, v_B = 1.0833333 / 4 = 0.2708333; se = sqrt(0.6041667) = 0.7772816; t = 2.251436;
  //   df = 0.6041667^2 / (v_A^2 / 2 + v_B^2 / 3) = 0.3650174 / 0.0800058 = 4.562387;
  //   95% CI 1.75 -+ t_{0.975,4.562387} * se = -0.3071092 to 3.8071092 (as scipy.stats.ttest_ind(b, a,
  //   equal_var=False).confidence_interval()), p = 0.0792595.
  const SeedValues a{{1, 85}, {2, 86}, {3, 87}};
  const SeedValues b{{4, 86.5}, {5, 88}, {6, 87.5}, {7, 89}};
  const Comparison c = compare_by_seed(a, b);
  EXPECT_EQ(c.method, CompareMethod::welch);
  EXPECT_EQ(c.n_a, 3u);
  EXPECT_EQ(c.n_b, 4u);
  EXPECT_NEAR(c.diff, 1.75, 1e-12);
  EXPECT_NEAR(c.df, 4.562386980108498, 1e-9);
  EXPECT_NEAR(c.ci_low, -0.3071091957551144, 1e-8);
  EXPECT_NEAR(c.ci_high, 3.8071091957551144, 1e-8);
  EXPECT_NEAR(c.p, 0.07925946623376584, 1e-8);
  EXPECT_EQ(c.verdict, Verdict::cant_tell);
  ASSERT_TRUE(c.seeds_needed.has_value());
  EXPECT_GT(*c.seeds_needed, 4);
  EXPECT_NE(describe(c).find("Welch over 3 vs 4 seeds"), std::string::npos) << describe(c);
  EXPECT_NE(describe(c).find("seeds per group would tell"), std::string::npos) << describe(c);
}

TEST(CompareWelch, OneSeedInCommonIsNotEnoughToPair) {
  const Comparison c = compare_by_seed({{1, 85}, {2, 86}, {3, 87}}, {{3, 88}, {4, 89}, {5, 87.5}});
  EXPECT_EQ(c.method, CompareMethod::welch);
  EXPECT_EQ(c.n_a + c.n_b, 6u);
}

TEST(CompareTost, NarrowIntervalInsideDeltaIsEquivalent) {
  // d = 0.1, -0.1, 0.2, 0.0, -0.2: mean 0, sd = sqrt(0.1 / 4) = 0.1581; 90% CI 0 -+ 2.1318 * 0.0707 = -+0.151.
  const SeedValues a{{1, 85}, {2, 84}, {3, 86}, {4, 85.5}, {5, 84.5}};
  const Comparison c = compare_by_seed(a, shifted(a, {0.1, -0.1, 0.2, 0.0, -0.2}));
  EXPECT_NEAR(c.ci90_high, 2.1318467863266499 * std::sqrt(0.1 / 4) / std::sqrt(5.0), 1e-6);
  EXPECT_TRUE(c.within_delta);
  EXPECT_EQ(c.verdict, Verdict::equivalent);
  EXPECT_FALSE(c.seeds_needed.has_value());
  EXPECT_EQ(describe(c).rfind("B equivalent to A within ±0.5 points (difference +0.00, 90% CI -0.15 to +0.15", 0), 0u)
      << describe(c);
  // A tighter margin no longer holds the same interval.
  CompareOptions tight;
  tight.delta = 0.1;
  EXPECT_EQ(compare_by_seed(a, shifted(a, {0.1, -0.1, 0.2, 0.0, -0.2}), tight).verdict, Verdict::cant_tell);
}

TEST(CompareTost, IntervalStraddlingDeltaCannotTell) {
  // d = 0.3, -0.9, 1.2, -0.4, 0.6: mean 0.16, sd 0.82; the 90% interval (-0.62, 0.94) crosses +0.5
  // and the 95% one contains 0: neither better nor equivalent.
  const SeedValues a{{1, 85}, {2, 84}, {3, 86}, {4, 85.5}, {5, 84.5}};
  const Comparison c = compare_by_seed(a, shifted(a, {0.3, -0.9, 1.2, -0.4, 0.6}));
  EXPECT_LT(c.ci90_low, 0.5);
  EXPECT_GT(c.ci90_high, 0.5);
  EXPECT_LT(c.ci_low, 0);
  EXPECT_EQ(c.verdict, Verdict::cant_tell);
  ASSERT_TRUE(c.seeds_needed.has_value());
  // The rule: the smallest n whose 90% interval around 0.16 fits in +-0.5 (or whose 95% half-width
  // falls below 0.16, which needs more): check it against its neighbour.
  const int n = *c.seeds_needed;
  auto fits = [&](int k) { return 0.16 + student_t_quantile(0.95, k - 1) * c.sd_diff / std::sqrt(k) < 0.5; };
  EXPECT_TRUE(fits(n));
  EXPECT_FALSE(fits(n - 1));
  EXPECT_EQ(describe(c), fmt::format("can't tell B from A: difference +0.16 points (95% CI -0.87 to +1.19, paired "
                                     "over 5 seeds, p = 0.69); about {} seeds would tell",
                                     n));
}

TEST(CompareZeroSpread, IdenticalMetricsAreEquivalentNotSignificant) {
  // Same value in every run, over different seeds (Welch, unequal n so the means round differently
  // if they are formed) and over the same seeds (paired, all differences 0).
  const double v = 85.13;
  const Comparison w =
      compare_by_seed({{1, v}, {2, v}, {3, v}}, {{4, v}, {5, v}, {6, v}, {7, v}, {8, v}, {9, v}, {10, v}});
  EXPECT_EQ(w.method, CompareMethod::welch);
  EXPECT_EQ(w.diff, 0);
  EXPECT_EQ(w.ci_low, 0);
  EXPECT_EQ(w.ci_high, 0);
  EXPECT_EQ(w.p, 1);
  EXPECT_EQ(w.verdict, Verdict::equivalent);
  const Comparison p = compare_by_seed({{1, v}, {2, 0.1 + 0.2}, {3, 70}}, {{1, v}, {2, 0.1 + 0.2}, {3, 70}});
  EXPECT_EQ(p.method, CompareMethod::paired);
  EXPECT_EQ(p.verdict, Verdict::equivalent);
  EXPECT_EQ(p.p, 1);
}

TEST(CompareZeroSpread, AConstantNonzeroDifferenceIsJudgedByTheExactTestOfItsSigns) {
  // Every seed moved by +0.5: no spread, so no t interval. 3 pairs: sign test p = 2 / 2^3 = 0.25,
  // can't tell, and 6 pairs would (2 / 2^6 = 0.031 < 0.05). 6 pairs: better.
  const Comparison p3 = compare_by_seed({{1, 80}, {2, 84}, {3, 88}}, {{1, 80.5}, {2, 84.5}, {3, 88.5}});
  EXPECT_EQ(p3.sd_diff, 0);
  EXPECT_EQ(p3.diff, 0.5);
  EXPECT_TRUE(std::isnan(p3.ci_low) && std::isnan(p3.ci_high));
  EXPECT_DOUBLE_EQ(p3.p, 0.25);
  EXPECT_EQ(p3.verdict, Verdict::cant_tell);
  ASSERT_TRUE(p3.seeds_needed.has_value());
  EXPECT_EQ(*p3.seeds_needed, 6);
  EXPECT_EQ(describe(p3),
            "can't tell B from A: difference +0.50 points (no spread between seeds, so no interval; "
            "paired over 3 seeds, exact sign test, p = 0.25); about 6 seeds would tell");
  const SeedValues a6{{1, 80}, {2, 84}, {3, 88}, {4, 81}, {5, 85}, {6, 87}};
  const Comparison p6 = compare_by_seed(a6, shifted(a6, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}));
  EXPECT_DOUBLE_EQ(p6.p, 2.0 / 64);
  EXPECT_EQ(p6.verdict, Verdict::b_better);
  // Accuracies read as fractions and shown in points: both seeds lost 176 of 5,000 test images, and
  // the two differences agree only up to float rounding. Still no spread, not p ~ 0.
  const Comparison r = compare_by_seed({{1, 100 * 0.8804}, {2, 100 * 0.8800}}, {{1, 100 * 0.8452}, {2, 100 * 0.8448}});
  EXPECT_EQ(r.sd_diff, 0);
  EXPECT_DOUBLE_EQ(r.p, 0.5);
  EXPECT_EQ(r.verdict, Verdict::cant_tell);
  // Disjoint seeds, no spread within either group: the permutation test, 2 / C(5, 2) = 0.2 for
  // 2 vs 3 values, 2 / C(8, 4) = 0.029 for 4 vs 4.
  const Comparison w5 = compare_by_seed({{1, 86}, {2, 86}}, {{3, 85}, {4, 85}, {5, 85}});
  EXPECT_EQ(w5.method, CompareMethod::welch);
  EXPECT_EQ(w5.diff, -1);
  EXPECT_DOUBLE_EQ(w5.p, 0.2);
  EXPECT_EQ(w5.verdict, Verdict::cant_tell);
  const Comparison w8 = compare_by_seed({{1, 86}, {2, 86}, {3, 86}, {4, 86}}, {{5, 85}, {6, 85}, {7, 85}, {8, 85}});
  EXPECT_DOUBLE_EQ(w8.p, 2.0 / 70);
  EXPECT_EQ(w8.verdict, Verdict::b_worse);
  EXPECT_EQ(describe(w8),
            "B worse than A by 1.00 points (no spread between seeds, so no interval; Welch over 4 vs "
            "4 seeds, exact permutation test, p = 0.029)");
}

TEST(ComparePairing, RemovesSeedToSeedSpread) {
  // Seeds differ by up to 8 points, B is 0.3 to 0.5 points above A on every seed. Paired: the
  // differences' sd is 0.079, so B is clearly better. The same numbers under disjoint seeds
  // (Welch) drown the 0.4 in the 3-point spread between seeds.
  const SeedValues a{{1, 80}, {2, 84}, {3, 88}, {4, 82}, {5, 86}};
  const SeedValues b = shifted(a, {0.4, 0.5, 0.3, 0.45, 0.35});
  const Comparison paired = compare_by_seed(a, b);
  EXPECT_EQ(paired.method, CompareMethod::paired);
  EXPECT_EQ(paired.verdict, Verdict::b_better);
  EXPECT_LT(paired.p, 1e-3);
  const Comparison welch = compare_by_seed(a, reseeded(b, 100));
  EXPECT_EQ(welch.method, CompareMethod::welch);
  EXPECT_NEAR(welch.diff, paired.diff, 1e-12);
  EXPECT_EQ(welch.verdict, Verdict::cant_tell);
  EXPECT_GT(welch.p, 0.5);
}

TEST(CompareHolm, CorrectionTurnsAMarginalDifferenceIntoCantTell) {
  // The worked paired example (p = 0.0042) and a weaker one (p = 0.0293, 95% CI 0.12 to 1.36)
  // among 4 comparisons of one report: Holm gives the weaker one 3 x 0.0293 = 0.088 >= 0.05.
  const SeedValues a{{1, 85.0}, {2, 86.0}, {3, 84.5}, {4, 85.5}, {5, 86.5}};
  std::vector<Comparison> cs;
  cs.push_back(compare_by_seed(a, shifted(a, {1.0, 1.5, 0.5, 1.2, 0.8})));
  cs.push_back(compare_by_seed(a, shifted(a, {0.4, 1.4, 0.2, 1.1, 0.6})));
  cs.push_back(compare_by_seed(a, shifted(a, {0.3, -0.9, 1.2, -0.4, 0.6})));
  cs.push_back(compare_by_seed(a, shifted(a, {0.1, -0.1, 0.2, 0.0, -0.2})));
  ASSERT_EQ(cs[1].verdict, Verdict::b_better);
  ASSERT_GT(cs[1].ci_low, 0);
  ASSERT_GT(cs[1].p, 0.05 / 3);
  const double p0 = cs[0].p, p1 = cs[1].p;
  adjust_for_multiple_comparisons(cs);
  for (const Comparison& c : cs) EXPECT_EQ(c.m, 4u);
  EXPECT_NEAR(cs[0].p_adjusted, 4 * p0, 1e-12);  // the smallest p, times m
  EXPECT_NEAR(cs[1].p_adjusted, 3 * p1, 1e-12);
  EXPECT_EQ(cs[0].verdict, Verdict::b_better);
  EXPECT_EQ(cs[1].verdict, Verdict::cant_tell);
  EXPECT_EQ(describe(cs[1]).rfind("can't tell B from A: difference +0.74 points (95% CI +0.12 to +1.36, paired over "
                                  "5 seeds, p = 0.029, Holm-adjusted p = 0.088 for 4 comparisons); not significant "
                                  "once corrected for 4 comparisons; about ",
                                  0),
            0u)
      << describe(cs[1]);
  EXPECT_NE(describe(cs[0]).find("Holm-adjusted p = 0.017 for 4 comparisons"), std::string::npos) << describe(cs[0]);
  EXPECT_EQ(cs[3].verdict, Verdict::equivalent);  // equivalence does not use the adjusted p
}

TEST(CompareHolm, ComparisonsWithoutAPValueDoNotCount) {
  std::vector<Comparison> cs{compare_by_seed({{1, 85}}, {{1, 86}}),
                             compare_by_seed({{1, 80}, {2, 84}, {3, 88}}, {{1, 80.5}, {2, 84.6}, {3, 88.4}})};
  adjust_for_multiple_comparisons(cs);
  EXPECT_EQ(cs[1].m, 1u);
  EXPECT_EQ(cs[1].verdict, Verdict::b_better);
  EXPECT_EQ(cs[0].method, CompareMethod::too_few);
  EXPECT_EQ(cs[0].verdict, Verdict::cant_tell);
}

// m is the family a comparison was tested in: one that tested nothing (too few runs, no p) has
// m 0, alone and beside tested ones (before: 1, as if it were a family of one).
TEST(CompareHolm, AComparisonWithoutAPValueHasMZero) {
  EXPECT_EQ(compare_by_seed({{1, 85}}, {{1, 86}}).m, 0u);
  EXPECT_EQ(compare_by_seed({{1, 85}, {2, 86}}, {{1, 86}, {2, 88}}).m, 1u);
  std::vector<Comparison> alone{compare_by_seed({{1, 85}}, {{1, 86}})};
  adjust_for_multiple_comparisons(alone);
  EXPECT_EQ(alone[0].m, 0u);
  std::vector<Comparison> cs{compare_by_seed({{1, 85}}, {{1, 86}}),
                             compare_by_seed({{1, 80}, {2, 84}, {3, 88}}, {{1, 80.5}, {2, 84.6}, {3, 88.4}})};
  adjust_for_multiple_comparisons(cs);
  EXPECT_EQ(cs[0].m, 0u);
  EXPECT_EQ(cs[1].m, 1u);
}

TEST(CompareTooFew, OneSeedEachCannotTell) {
  const Comparison c = compare_by_seed({{1, 85}}, {{1, 86}});
  EXPECT_EQ(c.method, CompareMethod::too_few);
  EXPECT_EQ(c.verdict, Verdict::cant_tell);
  EXPECT_EQ(c.n_pairs, 1u);
  EXPECT_EQ(c.diff, 1);
  EXPECT_FALSE(c.seeds_needed.has_value());
  EXPECT_NE(describe(c).find("need 2 seeds in common or 2 in each group"), std::string::npos) << describe(c);
  EXPECT_NE(describe(compare_by_seed({}, {{1, 86}}), "base").find("base has no values"), std::string::npos);
}

TEST(CompareSeeds, SeedsForEffect) {
  // 50% power: the smallest n with t_{0.975,n-1} sd / sqrt(n) < effect. Effect 1, sd 1:
  // n = 6: 2.5706 / 2.4495 = 1.049 (no); n = 7: 2.4469 / 2.6458 = 0.925 (yes).
  EXPECT_EQ(seeds_for_effect(1, 1), 7);
  EXPECT_EQ(seeds_for_effect(1, 0), 2);
  EXPECT_FALSE(seeds_for_effect(0, 1).has_value());
  EXPECT_FALSE(seeds_for_effect(0.01, 3).has_value());  // beyond 1000
  // 80% power: (t_{0.975,n-1} + t_{0.8,n-1}) sd / sqrt(n) < effect; n = 10: (2.2622 + 0.8834) / 3.1623 = 0.995.
  EXPECT_EQ(seeds_for_effect(1, 1, 0.05, 0.8), 10);
}

TEST(CompareSeeds, PowerApproximationHoldsInSimulation) {
  // Draw paired differences ~ N(1, 1) at the n seeds_for_effect gives and count how often the
  // paired test finds the difference. The exact (noncentral t) power at those n, from
  // 1 - nct.cdf(t_c, n - 1, sqrt(n)) + nct.cdf(-t_c, n - 1, sqrt(n)): n = 7 -> 0.6005 (asked 0.5;
  // the smallest n that clears the bar overshoots), n = 10 -> 0.8031 (asked 0.8).
  std::mt19937_64 rng(18);
  for (auto [power, exact] : {std::pair{0.5, 0.6005}, std::pair{0.8, 0.8031}}) {
    const int n = *seeds_for_effect(1, 1, 0.05, power);
    const double tc = student_t_quantile(0.975, n - 1);
    std::normal_distribution<double> d(1.0, 1.0);
    int found = 0;
    const int reps = 4000;
    for (int r = 0; r < reps; ++r) {
      std::vector<double> x(n);
      for (double& v : x) v = d(rng);
      found += std::fabs(mean(x) / (sample_std(x) / std::sqrt(n))) > tc;
    }
    EXPECT_NEAR(static_cast<double>(found) / reps, exact, 0.03) << "power " << power << " n " << n;  // ~4 sd
  }
}

TEST(CompareResolution, TestSetSamplingError) {
  EXPECT_NEAR(test_set_sampling_error_points(0.9, 10000), 0.3, 1e-12);  // 100 sqrt(0.9 x 0.1 / 10^4)
  EXPECT_NEAR(test_set_sampling_error_points(0.5, 2500), 1.0, 1e-12);
  EXPECT_EQ(test_set_sampling_error_points(1.0, 10000), 0);
  EXPECT_ANY_THROW(test_set_sampling_error_points(90, 10000));  // points, not a fraction
  const SeedValues a{{1, 85.0}, {2, 86.0}, {3, 84.5}, {4, 85.5}, {5, 86.5}};
  Comparison c = compare_by_seed(a, shifted(a, {0.2, 0.25, 0.2, 0.15, 0.2}));
  ASSERT_EQ(c.verdict, Verdict::b_better);
  c.resolution_floor = test_set_sampling_error_points(0.855, 10000);
  EXPECT_NE(describe(c).find("smaller than the test set's own sampling error (±0.35 points)"), std::string::npos)
      << describe(c);
  EXPECT_NE(describe(c).find("inside the ±0.5-point equivalence margin"), std::string::npos) << describe(c);
}

TEST(CompareSeeds, PrintsTheTableInDocsReport) {
  // docs/report.md, "Comparisons with few seeds": paired seeds needed for an effect (points) given
  // the sd of the per-seed differences, at 50% power (interval half-width below the effect) and 80%.
  fmt::print("| effect \\ paired sd | 0.3 | 1 | 3 |\n| --- | --- | --- | --- |\n");
  for (double effect : {0.5, 1.0, 2.0}) {
    std::string row = fmt::format("| {:g} points |", effect);
    for (double sd : {0.3, 1.0, 3.0})
      row += fmt::format(" {} / {} |", *seeds_for_effect(effect, sd), *seeds_for_effect(effect, sd, 0.05, 0.8));
    fmt::print("{}\n", row);
  }
  EXPECT_EQ(seeds_for_effect(0.5, 3), 141);
  EXPECT_EQ(seeds_for_effect(0.5, 3, 0.05, 0.8), 285);
  EXPECT_EQ(seeds_for_effect(2, 0.3), 3);
}

TEST(CompareVerdict, Names) {
  EXPECT_EQ(verdict_name(Verdict::b_better), "B better");
  EXPECT_EQ(verdict_name(Verdict::b_worse), "B worse");
  EXPECT_EQ(verdict_name(Verdict::equivalent), "equivalent");
  EXPECT_EQ(verdict_name(Verdict::cant_tell), "can't tell");
}
