#include "ddplab/distributed/param_average.h"

#include <cmath>
#include <mutex>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "distributed/ranks.h"

namespace ddplab::distributed {
namespace {

TEST(ParamAverager, AverageGivesEveryRankTheMeanAndCarriesStops) {
  std::mutex mutex;
  std::vector<at::Tensor> got(2);
  std::vector<bool> stop(2), diverged(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const double v = comm->rank == 0 ? 1.0 : 4.0;
    auto w = torch::full({2, 3}, v, torch::requires_grad());
    auto b = torch::full({3}, -v, torch::requires_grad());
    ParamAverager avg({w, b}, comm);
    EXPECT_EQ(avg.payload_bytes(), (6 + 3 + 2) * 4) << "parameters and the stop and divergence slots";
    const auto agreed = avg.average({/*stop=*/comm->rank == 1, /*diverged=*/false});
    std::lock_guard<std::mutex> lock(mutex);
    got[comm->rank] = torch::cat({w.detach().reshape({-1}), b.detach()});
    stop[comm->rank] = agreed.stop;
    diverged[comm->rank] = agreed.diverged;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(got[r].narrow(0, 0, 6), torch::full({6}, 2.5f))) << got[r];
    EXPECT_TRUE(torch::equal(got[r].narrow(0, 6, 3), torch::full({3}, -2.5f))) << got[r];
    EXPECT_TRUE(stop[r]) << "rank 1 asked; rank " << r << " must know";
    EXPECT_FALSE(diverged[r]);
  }
}

// A rank whose local gradient went NaN tells every rank at the averaging point, even when its
// parameters (NaN) poison the averaged values.
TEST(ParamAverager, ADivergenceOfOneRankIsAgreedByAll) {
  std::vector<int> stop(2, 1), diverged(2, 0);  // int: written by two threads at once
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    auto p = torch::zeros({3}, torch::requires_grad());
    ParamAverager avg({p}, comm);
    if (comm->rank == 0) {
      torch::NoGradGuard no_grad;
      p.fill_(std::nan(""));
    }
    const auto agreed = avg.elastic_step(0.25, {/*stop=*/false, /*diverged=*/comm->rank == 0});
    stop[comm->rank] = agreed.stop;
    diverged[comm->rank] = agreed.diverged;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(diverged[r]) << "rank " << r;
    EXPECT_FALSE(stop[r]) << "rank " << r;
  }
}

TEST(ParamAverager, ElasticStepMovesReplicasAndCenterByAlpha) {
  std::mutex mutex;
  std::vector<at::Tensor> x(2), center(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    auto p = torch::zeros({4}, torch::requires_grad());
    ParamAverager avg({p}, comm);  // the center starts at the (shared) initial parameters: 0
    {
      torch::NoGradGuard no_grad;
      p.fill_(comm->rank == 0 ? 1.0 : 3.0);  // the replicas have trained apart
    }
    EXPECT_FALSE(avg.elastic_step(0.25, {}).stop);
    std::lock_guard<std::mutex> lock(mutex);
    x[comm->rank] = p.detach().clone();
    center[comm->rank] = avg.center()[0].clone();
  });
  // x_r -= alpha (x_r - c): 1 -> 0.75, 3 -> 2.25; c += alpha * ((1 - 0) + (3 - 0)) = 1.
  EXPECT_TRUE(torch::allclose(x[0], torch::full({4}, 0.75f)));
  EXPECT_TRUE(torch::allclose(x[1], torch::full({4}, 2.25f)));
  EXPECT_TRUE(torch::equal(center[0], center[1])) << "the center is identical on every rank";
  EXPECT_TRUE(torch::allclose(center[0], torch::full({4}, 1.0f)));
}

TEST(ParamAverager, ElasticStepWithAlphaZeroChangesNothing) {
  auto p = torch::full({3}, 5.0, torch::requires_grad());
  ParamAverager avg({p}, nullptr);
  {
    torch::NoGradGuard no_grad;
    p.fill_(7.0);
  }
  avg.elastic_step(0.0, {});
  EXPECT_TRUE(torch::equal(p.detach(), torch::full({3}, 7.0f)));
  EXPECT_TRUE(torch::equal(avg.center()[0], torch::full({3}, 5.0f)));
}

TEST(ParamAverager, OneReplicaElasticStepAndAverage) {
  auto p = torch::zeros({2}, torch::requires_grad());
  ParamAverager avg({p}, nullptr);
  {
    torch::NoGradGuard no_grad;
    p.fill_(1.0);
  }
  EXPECT_TRUE(avg.average({/*stop=*/true, /*diverged=*/false}).stop) << "one replica agrees with itself";
  EXPECT_TRUE(torch::equal(p.detach(), torch::ones({2})));
  avg.elastic_step(0.5, {});
  EXPECT_TRUE(torch::allclose(p.detach(), torch::full({2}, 0.5f)));
  EXPECT_TRUE(torch::allclose(avg.center()[0], torch::full({2}, 0.5f)));
  EXPECT_EQ(avg.spread().drift, 0.0);
}

TEST(ParamAverager, SpreadMeasuresDriftFromTheReplicasMean) {
  std::mutex mutex;
  std::vector<ParamAverager::Spread> spread(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    auto p = torch::full({2}, comm->rank == 0 ? 1.0 : 3.0, torch::requires_grad());
    ParamAverager avg({p}, comm);
    auto s = avg.spread();
    std::lock_guard<std::mutex> lock(mutex);
    spread[comm->rank] = s;
  });
  for (int r = 0; r < 2; ++r) {
    // Mean [2, 2]; each replica is sqrt(2) from it; |mean| = 2 sqrt(2): drift 0.5.
    EXPECT_NEAR(spread[r].drift, 0.5, 1e-12);
    ASSERT_EQ(spread[r].mean.size(), 1u);
    EXPECT_TRUE(torch::equal(spread[r].mean[0], torch::full({2}, 2.0f)));
    EXPECT_EQ(spread[r].mean[0].scalar_type(), torch::kFloat);
  }
}

}  // namespace
}  // namespace ddplab::distributed
