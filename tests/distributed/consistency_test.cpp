#include "ddplab/distributed/consistency.h"

#include <mutex>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "distributed/ranks.h"

namespace ddplab::distributed {
namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

TEST(Consistency, EqualParametersOnEveryRankPass) {
  std::mutex mutex;
  std::vector<bool> found(2, true);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    Named named{{"fc.weight", torch::arange(6, torch::kFloat32).reshape({2, 3})}, {"fc.bias", torch::ones({3})}};
    const auto mismatch = first_replica_mismatch(*comm, named);
    std::lock_guard<std::mutex> lock(mutex);
    found[comm->rank] = mismatch.has_value();
  });
  EXPECT_FALSE(found[0]);
  EXPECT_FALSE(found[1]);
}

TEST(Consistency, TheFirstDifferingParameterIsNamedOnEveryRank) {
  std::mutex mutex;
  std::vector<std::optional<ReplicaMismatch>> got(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const float v = comm->rank == 0 ? 1.0f : 2.0f;
    Named named{
        {"conv.weight", torch::ones({4})}, {"conv.bias", torch::full({2}, v)}, {"fc.weight", torch::full({3}, v)}};
    auto mismatch = first_replica_mismatch(*comm, named);
    std::lock_guard<std::mutex> lock(mutex);
    got[comm->rank] = std::move(mismatch);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(got[r].has_value()) << "rank " << r;
    EXPECT_EQ(got[r]->index, 1u);
    EXPECT_EQ(got[r]->name, "conv.bias");
    EXPECT_DOUBLE_EQ(got[r]->lo, 2.0);  // the sums: 2 x 1 on rank 0, 2 x 2 on rank 1
    EXPECT_DOUBLE_EQ(got[r]->hi, 4.0);
  }
}

// A sign flip keeps the sum of squares; the plain sum still tells the replicas apart.
TEST(Consistency, ASignFlipIsFound) {
  std::mutex mutex;
  std::vector<bool> found(2, false);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    Named named{{"w", torch::full({2}, comm->rank == 0 ? 1.5f : -1.5f)}};
    const auto mismatch = first_replica_mismatch(*comm, named);
    std::lock_guard<std::mutex> lock(mutex);
    found[comm->rank] = mismatch.has_value();
  });
  EXPECT_TRUE(found[0]);
  EXPECT_TRUE(found[1]);
}

}  // namespace
}  // namespace ddplab::distributed
