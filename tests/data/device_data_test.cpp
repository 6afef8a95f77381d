#include "ddplab/data/device_data.h"

#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::data {
namespace {

// n images of random bytes (every byte value occurs) and labels i % 10; the statistics as
// load_dataset computes them.
DatasetPair random_bytes(int64_t n, int64_t channels, int64_t side) {
  torch::manual_seed(7);
  auto make = [&](int64_t size) {
    Dataset s;
    s.images = torch::randint(0, 256, {size, channels, side, side}, torch::kLong).to(torch::kUInt8);
    s.labels = torch::arange(size, torch::kLong) % 10;
    return s;
  };
  DatasetPair d;
  d.name = "random";
  d.train = make(n);
  d.test = make(n / 2);
  const auto scaled = d.train.images.to(torch::kDouble) / 255.0;
  d.mean = scaled.mean().item<double>();
  d.std = scaled.std(/*unbiased=*/false).item<double>();
  d.channel_mean.clear();
  d.channel_std.clear();
  for (int64_t c = 0; c < channels; ++c) {
    d.channel_mean.push_back(scaled.select(1, c).mean().item<double>());
    d.channel_std.push_back(scaled.select(1, c).std(/*unbiased=*/false).item<double>());
  }
  return d;
}

// Equal as bits, not only as values (0.0 and -0.0 differ).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.scalar_type() != torch::kFloat) return torch::equal(a, b);
  return torch::equal(a.contiguous().view(torch::kInt), b.contiguous().view(torch::kInt));
}

// Every batch of `epochs` epochs of the host loader and of the device loader, for each rank of
// `world`, compared bit for bit.
void expect_loaders_agree(const DatasetPair& d, config::Augment augment, int world, int strided, int epochs,
                          c10::Device on = torch::kCPU) {
  const auto transform = make_transform(augment, d);
  const DeviceDataset train(d.train, transform, on);
  const int64_t global = 8 * world, seed = 11;
  for (int rank = 0; rank < world; ++rank) {
    TrainLoader host(d, transform, global, rank, world, seed, config::DataOrder::kIndependent, 2, false, strided);
    DeviceLoader device(train, StepShards(d.train.size(), global, rank, world, strided), seed);
    ASSERT_EQ(host.steps_per_epoch(), device.steps_per_epoch());
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      host.start_epoch(epoch);
      device.start_epoch(epoch);
      for (int64_t step = 0; step < host.steps_per_epoch(); ++step) {
        const auto want = host.next(), got = device.next();
        ASSERT_TRUE(want && got);
        EXPECT_EQ(got->x.device(), on);
        EXPECT_TRUE(same_bits(want->x, got->x.cpu())) << "rank " << rank << " epoch " << epoch << " step " << step;
        EXPECT_TRUE(same_bits(want->y, got->y.cpu())) << "rank " << rank << " epoch " << epoch << " step " << step;
      }
      EXPECT_FALSE(device.next().has_value()) << "the epoch ends after its steps";
    }
  }
}

TEST(DeviceData, BatchesAreTheHostLoadersBitForBitWithoutAugmentation) {
  const DatasetPair d = random_bytes(96, 1, 6);
  expect_loaders_agree(d, config::Augment::kNone, /*world=*/1, /*strided=*/1, /*epochs=*/2);
  expect_loaders_agree(d, config::Augment::kNone, /*world=*/2, /*strided=*/2, /*epochs=*/1);
}

TEST(DeviceData, AugmentedBatchesAreTheHostLoadersBitForBit) {
  const DatasetPair d = random_bytes(96, 3, 8);
  expect_loaders_agree(d, config::Augment::kStandard, /*world=*/1, /*strided=*/1, /*epochs=*/3);
  expect_loaders_agree(d, config::Augment::kStandard, /*world=*/3, /*strided=*/1, /*epochs=*/1);
}

// On a GPU (skipped elsewhere; scripts/gpu-check.sh runs the *OnCuda* tests): CUDA's kernels
// give the host's batches too.
TEST(DeviceData, OnCudaBatchesAreTheHostLoadersBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device gpu(c10::kCUDA, 0);
  expect_loaders_agree(random_bytes(96, 1, 6), config::Augment::kNone, 2, 2, 2, gpu);
  expect_loaders_agree(random_bytes(96, 3, 8), config::Augment::kStandard, 2, 1, 2, gpu);
}

TEST(DeviceData, EvaluationBatchesAreMakeBatchsBitForBit) {
  const DatasetPair d = random_bytes(40, 3, 8);
  for (const auto augment : {config::Augment::kNone, config::Augment::kStandard}) {
    const auto transform = make_transform(augment, d);
    const DeviceDataset test(d.test, transform, torch::kCPU);
    const auto idx = torch::tensor({19, 0, 7, 7, 3}, torch::kLong);
    const Batch want = make_batch(d.test, idx, *transform, /*train=*/false), got = test.batch(idx);
    EXPECT_TRUE(same_bits(want.x, got.x)) << config::name(augment);
    EXPECT_TRUE(same_bits(want.y, got.y)) << config::name(augment);
  }
}

TEST(DeviceData, EveryDrawIsTheHostsPerSampleDraw) {
  const DatasetPair d = random_bytes(8, 3, 8);
  const auto transform = make_transform(config::Augment::kStandard, d);
  const int64_t n = 500;
  for (const int64_t seed : {int64_t{0}, int64_t{1}, int64_t{-3}, int64_t{1} << 62}) {
    const SampleDraws draws = transform->draw_all(seed, /*epoch=*/seed == 0 ? 0 : 5, n, torch::kCPU);
    int flips = 0;
    for (int64_t i = 0; i < n; ++i) {
      const SampleAugmentation a = transform->draw(seed, seed == 0 ? 0 : 5, i);
      ASSERT_EQ(draws.top[i].item<int64_t>(), a.top) << "seed " << seed << " sample " << i;
      ASSERT_EQ(draws.left[i].item<int64_t>(), a.left) << "seed " << seed << " sample " << i;
      ASSERT_EQ(draws.flip[i].item<bool>(), a.flip) << "seed " << seed << " sample " << i;
      flips += a.flip ? 1 : 0;
    }
    EXPECT_GT(flips, n / 3) << "about half the samples flip";
    EXPECT_LT(flips, 2 * n / 3) << "about half the samples flip";
  }
}

TEST(DeviceData, TheSameSeedDrawsTheSameAugmentationAndAnotherEpochOthers) {
  const DatasetPair d = random_bytes(64, 3, 8);
  const auto transform = make_transform(config::Augment::kStandard, d);
  const DeviceDataset train(d.train, transform, torch::kCPU);
  auto first_batch = [&](int64_t seed, int64_t epoch) {
    DeviceLoader loader(train, StepShards(d.train.size(), 64, 0, 1), seed);
    loader.start_epoch(epoch);
    return loader.next()->x;
  };
  EXPECT_TRUE(same_bits(first_batch(3, 1), first_batch(3, 1)));
  EXPECT_FALSE(torch::equal(first_batch(3, 1), first_batch(3, 2))) << "every sample is in both; its crop differs";
  EXPECT_FALSE(torch::equal(first_batch(3, 1), first_batch(4, 1)));
}

TEST(DeviceData, AutoPlacesBatchesOnAGpuOnlyForPointwiseTransforms) {
  const DatasetPair d = random_bytes(16, 3, 8);
  const auto standard = make_transform(config::Augment::kStandard, d);
  const auto tf = make_transform(config::Augment::kTfTutorial, random_bytes(16, 3, 32));
  EXPECT_FALSE(batches_on_device(config::DataPlacement::kHost, d, *standard, c10::Device(c10::kCUDA, 0)));
  EXPECT_TRUE(batches_on_device(config::DataPlacement::kDevice, d, *standard, torch::kCPU));
  EXPECT_FALSE(batches_on_device(config::DataPlacement::kAuto, d, *standard, torch::kCPU))
      << "a CPU has no copy to save";
  EXPECT_TRUE(batches_on_device(config::DataPlacement::kAuto, d, *standard, c10::Device(c10::kCUDA, 0)));
  EXPECT_FALSE(batches_on_device(config::DataPlacement::kAuto, d, *tf, c10::Device(c10::kCUDA, 0)))
      << "tf_tutorial's brightness and contrast are made on the host";
  DatasetPair huge = d;  // 2^25 images of 3 x 8 x 8 (+ padding): over kAutoPlacementBytes, never allocated
  huge.train.images = d.train.images.narrow(0, 0, 1).expand({int64_t{1} << 25, 3, 8, 8});
  huge.train.labels = d.train.labels.narrow(0, 0, 1).expand({int64_t{1} << 25});
  EXPECT_FALSE(batches_on_device(config::DataPlacement::kAuto, huge, *standard, c10::Device(c10::kCUDA, 0)));
  EXPECT_FALSE(tf->pointwise());
  EXPECT_TRUE(standard->pointwise());
}

}  // namespace
}  // namespace ddplab::data
