#include "ddplab/data/loader.h"

#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "test_util.h"

namespace ddplab::data {
namespace {

// A synthetic dataset whose image i holds the value i % 256 in every pixel and label i % 10,
// so a batch reveals which samples it took.
DatasetPair synthetic(int64_t n_train, int64_t n_test = 10) {
  DatasetPair d;
  d.name = "synthetic";
  auto make = [](int64_t n) {
    Dataset s;
    auto idx = torch::arange(n, torch::kLong);
    s.images = (idx % 256).to(torch::kUInt8).view({n, 1, 1, 1}).expand({n, 1, 4, 4}).contiguous();
    s.labels = idx % 10;
    return s;
  };
  d.train = make(n_train);
  d.test = make(n_test);
  d.mean = 0.3;
  d.std = 0.4;
  return d;
}

// The "none" transform: (v/255 - mean) / std, as before transforms existed.
std::shared_ptr<const Transform> none(const DatasetPair& d) { return make_transform(config::Augment::kNone, d); }

std::vector<int64_t> to_vec(const at::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

constexpr auto kTorch = config::DataOrder::kTorchSampler;

TEST(Loader, TorchSamplerOrderMatchesPythonTorch) {
  // torch.randperm(10, generator=torch.Generator().manual_seed(8)) in Python.
  EXPECT_EQ(to_vec(epoch_permutation(10, 5, 3, kTorch)), (std::vector<int64_t>{3, 5, 0, 1, 2, 6, 4, 7, 8, 9}));
  auto p = to_vec(epoch_permutation(1000, 1, 2, kTorch));
  EXPECT_EQ(std::vector<int64_t>(p.begin(), p.begin() + 8),
            (std::vector<int64_t>{986, 114, 871, 894, 140, 885, 232, 402}));
}

TEST(Loader, TorchSamplerOrderRepeatsAcrossNeighbouringSeeds) {
  // DistributedSampler's seed + epoch: seed 4's epoch 1 is seed 3's epoch 2.
  EXPECT_TRUE(torch::equal(epoch_permutation(500, 4, 1, kTorch), epoch_permutation(500, 3, 2, kTorch)));
}

TEST(Loader, IndependentOrdersShareNoEpochAcrossASweepsRepeats) {
  // Repeats of a sweep take seeds s, s + 1, ...: no epoch of one may be an epoch of another.
  const int64_t n = 500;
  std::vector<at::Tensor> seen;
  for (int64_t seed = 1; seed <= 5; ++seed)
    for (int64_t epoch = 0; epoch < 10; ++epoch) {
      auto p = epoch_permutation(n, seed, epoch);
      EXPECT_TRUE(torch::equal(p, epoch_permutation(n, seed, epoch, config::DataOrder::kIndependent)));
      EXPECT_TRUE(torch::equal(std::get<0>(p.sort()), torch::arange(n, torch::kLong)));
      for (const auto& q : seen) EXPECT_FALSE(torch::equal(p, q)) << "seed " << seed << " epoch " << epoch;
      seen.push_back(p);
    }
}

TEST(Loader, EpochOrderDeterministicAndVaries) {
  auto a = epoch_permutation(500, 7, 0);
  EXPECT_TRUE(torch::equal(a, epoch_permutation(500, 7, 0)));
  EXPECT_FALSE(torch::equal(a, epoch_permutation(500, 7, 1)));
  EXPECT_TRUE(torch::equal(std::get<0>(a.sort()), torch::arange(500, torch::kLong)));
  EXPECT_EQ(a.scalar_type(), torch::kLong);
}

TEST(Loader, EvalShardCoversOnceWithoutDuplicates) {
  const int64_t n = 10001;
  const int w = 3;
  std::vector<int> seen(n, 0);
  int64_t prev_end = 0;
  for (int r = 0; r < w; ++r) {
    auto [b, e] = eval_shard(n, r, w);
    EXPECT_EQ(b, prev_end);
    EXPECT_EQ(b, r * n / w);
    prev_end = e;
    for (int64_t i = b; i < e; ++i) ++seen[i];
  }
  EXPECT_EQ(prev_end, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << i;
  EXPECT_EQ(eval_shard(5, 0, 1), (std::pair<int64_t, int64_t>{0, 5}));
}

TEST(Loader, MakeBatchNormalizes) {
  DatasetPair d = synthetic(20);
  auto idx = torch::tensor({3, 17, 0}, torch::kLong);
  Batch b = make_batch(d.train, idx, *none(d), /*train=*/true);
  EXPECT_EQ(b.x.scalar_type(), torch::kFloat);
  EXPECT_EQ(b.x.sizes(), (std::vector<int64_t>{3, 1, 4, 4}));
  EXPECT_TRUE(b.x.is_contiguous());
  EXPECT_FALSE(b.x.requires_grad());
  EXPECT_NEAR(b.x[1][0][2][3].item<float>(), (17 / 255.0 - 0.3) / 0.4, 1e-6);
  EXPECT_EQ(to_vec(b.y), (std::vector<int64_t>{3, 7, 0}));
}

TEST(Loader, StepsPerEpochDropsPartialBatch) {
  DatasetPair d = synthetic(103);
  TrainLoader l(d, none(d), 10, 0, 2, 1);
  EXPECT_EQ(l.steps_per_epoch(), 10);
  EXPECT_EQ(l.local_batch(), 5);
  l.start_epoch(0);
  int count = 0;
  while (auto b = l.next()) {
    EXPECT_EQ(b->x.size(0), 5);
    ++count;
  }
  EXPECT_EQ(count, 10);
  EXPECT_FALSE(l.next().has_value());  // stays at the end
}

TEST(Loader, ShardsUnionEqualsSingleReplicaBatch) {
  DatasetPair d = synthetic(250);
  const int64_t g = 8;
  const int64_t seed = 42, epoch = 3;
  TrainLoader one(d, none(d), g, 0, 1, seed);
  one.start_epoch(epoch);
  std::vector<Batch> single;
  while (auto b = one.next()) single.push_back(*b);
  ASSERT_EQ(single.size(), 31u);
  for (int w : {1, 2, 4}) {
    std::vector<std::unique_ptr<TrainLoader>> loaders;
    for (int r = 0; r < w; ++r) {
      loaders.push_back(std::make_unique<TrainLoader>(d, none(d), g, r, w, seed, config::DataOrder::kIndependent, 2));
      loaders.back()->start_epoch(epoch);
    }
    for (size_t t = 0; t < single.size(); ++t) {
      std::vector<at::Tensor> xs, ys;
      for (auto& l : loaders) {
        auto b = l->next();
        ASSERT_TRUE(b.has_value()) << "world " << w << " step " << t;
        EXPECT_EQ(b->x.size(0), g / w);
        xs.push_back(b->x);
        ys.push_back(b->y);
      }
      EXPECT_TRUE(torch::equal(torch::cat(xs), single[t].x)) << "world " << w << " step " << t;
      EXPECT_TRUE(torch::equal(torch::cat(ys), single[t].y)) << "world " << w << " step " << t;
    }
    for (auto& l : loaders) EXPECT_FALSE(l->next().has_value());
  }
}

TEST(Loader, PrefetchedBatchesEqualMakeBatchOnExpectedIndices) {
  DatasetPair d = synthetic(300);
  const int64_t g = 12, seed = 9;
  const int rank = 1, world = 3;
  TrainLoader l(d, none(d), g, rank, world, seed, config::DataOrder::kIndependent, 3);
  for (int64_t epoch : {0, 1}) {
    l.start_epoch(epoch);
    auto perm = epoch_permutation(300, seed, epoch);
    for (int64_t t = 0; t < l.steps_per_epoch(); ++t) {
      auto b = l.next();
      ASSERT_TRUE(b.has_value());
      auto want = make_batch(d.train, perm.slice(0, t * g + rank * 4, t * g + rank * 4 + 4), *none(d), true);
      EXPECT_TRUE(torch::equal(b->x, want.x)) << "epoch " << epoch << " step " << t;
      EXPECT_TRUE(torch::equal(b->y, want.y));
    }
    EXPECT_FALSE(l.next().has_value());
  }
}

// dataset.shard "strided": rank r's batch t is what torch's DistributedSampler (indices[r::W] of
// the epoch's order) and a DataLoader of batch G/W give it; a process simulating the W replicas
// gets those shares one after the other.
TEST(Loader, StridedSharesAreDistributedSamplersAndASimulatingProcessGetsThemInReplicaOrder) {
  DatasetPair d = synthetic(300);
  const int64_t g = 12, seed = 9, epoch = 2, b = 4;
  const int world = 3;
  const auto perm = epoch_permutation(300, seed, epoch);
  const auto sampler = [&](int rank) { return perm.slice(0, rank, 300, world); };  // indices[rank::world]
  TrainLoader all(d, none(d), g, 0, 1, seed, config::DataOrder::kIndependent, 2, false, world);
  all.start_epoch(epoch);
  std::vector<std::unique_ptr<TrainLoader>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(
        std::make_unique<TrainLoader>(d, none(d), g, r, world, seed, config::DataOrder::kIndependent, 2, false, world));
    ranks.back()->start_epoch(epoch);
  }
  for (int64_t t = 0; t < all.steps_per_epoch(); ++t) {
    std::vector<at::Tensor> shares;
    for (int r = 0; r < world; ++r) {
      const auto want = make_batch(d.train, sampler(r).slice(0, t * b, (t + 1) * b), *none(d), true);
      const auto got = ranks[static_cast<size_t>(r)]->next();
      ASSERT_TRUE(got.has_value());
      EXPECT_TRUE(torch::equal(got->y, want.y)) << "rank " << r << " step " << t;
      EXPECT_TRUE(torch::equal(got->x, want.x)) << "rank " << r << " step " << t;
      shares.push_back(want.y);
    }
    const auto simulated = all.next();
    ASSERT_TRUE(simulated.has_value());
    EXPECT_TRUE(torch::equal(simulated->y, torch::cat(shares))) << "step " << t;
  }
}

TEST(Loader, FirstStepResumesAtTheRightBatch) {
  DatasetPair d = synthetic(100);
  TrainLoader full(d, none(d), 10, 0, 1, 5);
  full.start_epoch(2);
  std::vector<Batch> all;
  while (auto b = full.next()) all.push_back(*b);
  TrainLoader resumed(d, none(d), 10, 0, 1, 5);
  resumed.start_epoch(2, 6);
  for (size_t t = 6; t < all.size(); ++t) {
    auto b = resumed.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(torch::equal(b->y, all[t].y)) << t;
  }
  EXPECT_FALSE(resumed.next().has_value());
}

TEST(Loader, RestartMidEpochAndDestroyWhileProducing) {
  DatasetPair d = synthetic(1000);
  auto l = std::make_unique<TrainLoader>(d, none(d), 10, 0, 1, 3, config::DataOrder::kIndependent, 2);
  l->start_epoch(0);
  auto first = l->next();
  ASSERT_TRUE(first.has_value());
  l->start_epoch(0);  // abandons the running epoch; starts over
  auto again = l->next();
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(torch::equal(first->y, again->y));
  l.reset();  // the producer is blocked on a full queue: the destructor must not hang
  TrainLoader idle(d, none(d), 10, 0, 1, 3);
  EXPECT_FALSE(idle.next().has_value());  // no epoch started
}

// The loader's thread is the one thread an epoch starts (transform.h says why a parallel region
// there slows every step); the epoch's randperm fills its 200,000 entries in parallel, so it must
// be drawn on the caller's thread. A global batch of 40,000, over ATen's grain size (32,768), dealt
// to 2 strided replicas (one process simulating both, and rank 1 of 2) must not open one either.
// One batch prefetched: after 3 of 5 the loader thread is still there to be counted.
TEST(Loader, AnEpochStartsItsLoaderThreadAndNoOther) {
  const testing::IntraOpThreads two(2);
  auto d = synthetic(200000);
  d.channel_mean = {0.3};
  d.channel_std = {0.4};
  struct Case {
    int64_t global_batch;
    int rank, world, strided_replicas;
  };
  for (const Case c : {Case{4096, 0, 1, 1}, Case{40000, 0, 1, 2}, Case{40000, 1, 2, 2}}) {
    for (const auto augment : {config::Augment::kNone, config::Augment::kStandard}) {
      TrainLoader loader(d, make_transform(augment, d), c.global_batch, c.rank, c.world, /*seed=*/3,
                         config::DataOrder::kIndependent, /*prefetch=*/1, false, c.strided_replicas);
      const auto before = testing::process_thread_ids();
      loader.start_epoch(0);
      for (int step = 0; step < 3; ++step) ASSERT_TRUE(loader.next().has_value());
      EXPECT_EQ(testing::threads_started(before, testing::process_thread_ids()), 1)
          << config::name(augment) << ", global batch " << c.global_batch << ", rank " << c.rank << " of " << c.world
          << ", " << c.strided_replicas << " strided replicas";
    }
  }
}

// Pinning (CUDA runs) keeps to that: Tensor::pin_memory() would copy a batch of over ATen's grain
// size in parallel on the loader thread. Warmed first, so CUDA's own start-up threads are not counted.
TEST(Loader, OnCudaPinnedBatchesAreTheBatchesAndStartNoThread) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const testing::IntraOpThreads two(2);
  auto d = synthetic(40000);
  TrainLoader warm(d, none(d), /*global_batch=*/64, 0, 1, /*seed=*/3, config::DataOrder::kIndependent, 4, true);
  warm.start_epoch(0);
  ASSERT_TRUE(warm.next().has_value());
  TrainLoader plain(d, none(d), /*global_batch=*/4096, 0, 1, /*seed=*/3);
  TrainLoader pinned(d, none(d), /*global_batch=*/4096, 0, 1, /*seed=*/3, config::DataOrder::kIndependent, 4, true);
  plain.start_epoch(0);
  const auto before = testing::process_thread_ids();
  pinned.start_epoch(0);
  for (int step = 0; step < 3; ++step) {
    auto a = plain.next();
    auto b = pinned.next();
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_TRUE(b->x.is_pinned() && b->y.is_pinned());
    EXPECT_TRUE(torch::equal(a->x, b->x) && torch::equal(a->y, b->y)) << "step " << step;
  }
  EXPECT_EQ(testing::threads_started(before, testing::process_thread_ids()), 1);
}

TEST(Loader, ProducerErrorsAreRethrown) {
  DatasetPair d = synthetic(100);
  d.train.images = d.train.images.slice(0, 0, 50);  // labels say 100: a sample index is out of range
  TrainLoader l(d, none(d), 10, 0, 1, 1);
  l.start_epoch(0);
  bool threw = false;
  try {
    while (l.next()) {
    }
  } catch (const std::exception&) {
    threw = true;
  }
  EXPECT_TRUE(threw);
  EXPECT_FALSE(l.next().has_value());
}

}  // namespace
}  // namespace ddplab::data
