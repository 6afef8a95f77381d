// report/stats.h: means, t and Welch tests, Fisher's exact test, against scipy.
#include "ddplab/report/stats.h"

#include <cmath>

#include <gtest/gtest.h>

#include "ddplab/report/stats.h"
#include "test_util.h"

using namespace ddplab;
using namespace ddplab::report;

TEST(ReportStats, MeanAndSampleStd) {
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_NEAR(sample_std({1, 2, 3, 4}), std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_EQ(sample_std({7}), 0);
  EXPECT_TRUE(std::isnan(mean({})));
}

TEST(ReportStats, StudentTCdfMatchesScipy) {
  // scipy.stats.t.cdf
  EXPECT_NEAR(student_t_cdf(-2.0, 3.3), 0.0654794322197247, 1e-9);
  EXPECT_NEAR(student_t_cdf(1.5, 50), 0.9300485875707865, 1e-9);
  EXPECT_NEAR(student_t_cdf(0, 4), 0.5, 1e-12);
  // df = 1 is Cauchy: 0.5 + atan(t) / pi.
  EXPECT_NEAR(student_t_cdf(2.0, 1), 0.5 + std::atan(2.0) / M_PI, 1e-10);
  EXPECT_NEAR(regularized_incomplete_beta(2, 3, 0.4), 0.5248, 1e-10);  // 1 - sum_{j<2} C(4,j) .4^j .6^(4-j)
}

TEST(ReportStats, WelchMatchesScipy) {
  // scipy.stats.ttest_ind(a, b, equal_var=False)
  WelchResult r = welch_t_test({0.86, 0.87, 0.85}, {0.84, 0.83, 0.845});
  ASSERT_TRUE(r.valid);
  EXPECT_NEAR(r.t, 2.9824045403173076, 1e-9);
  // By hand: s_a^2 = 1e-4, s_b^2 = 1.75e-4 / 3; df = (va + vb)^2 / (va^2 / 2 + vb^2 / 2), v = s^2 / 3.
  const double va = 1e-4 / 3, vb = 1.75e-4 / 3 / 3;
  EXPECT_NEAR(r.df, (va + vb) * (va + vb) / (va * va / 2 + vb * vb / 2), 1e-9);
  EXPECT_NEAR(r.df, 3.7409326424870475, 1e-9);  // scipy's df
  EXPECT_NEAR(r.p, 0.04423613448708553, 1e-6);

  r = welch_t_test({1, 2, 3, 4, 5.5}, {2, 4, 6, 8.5});
  EXPECT_NEAR(r.t, -1.2700252065371362, 1e-9);
  EXPECT_NEAR(r.p, 0.2617957138615186, 1e-6);

  EXPECT_FALSE(welch_t_test({0.9}, {0.8, 0.81}).valid);
  EXPECT_EQ(welch_t_test({0.5, 0.5}, {0.5, 0.5}).p, 1);
  EXPECT_EQ(welch_t_test({0.5, 0.5}, {0.6, 0.6}).p, 0);
}

TEST(ReportStats, FisherExactTestOfTwoCounts) {
  EXPECT_NEAR(fisher_exact_two_sided(0, 3, 2, 2), 3.0 / 7, 1e-12);
  EXPECT_NEAR(fisher_exact_two_sided(3, 0, 0, 3), 0.1, 1e-12) << "all of A, none of B: 2 / C(6, 3)";
  EXPECT_NEAR(fisher_exact_two_sided(1, 2, 1, 2), 1.0, 1e-12);
  EXPECT_EQ(fisher_exact_two_sided(0, 3, 0, 3), 1.0) << "no bad runs at all";
}
