#include "ddplab/runtime/device.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::runtime {
namespace {

const c10::Device kCpu(c10::kCPU);

TEST(HostReadback, PopsValuesInPushOrder) {
  HostReadback readback(kCpu);
  readback.push(torch::tensor({1.0, 2.0}, torch::kFloat64));
  readback.push(torch::tensor({3.0}, torch::kFloat64));
  EXPECT_EQ(readback.pending(), 2);
  EXPECT_EQ(readback.pop(), (std::vector<double>{1.0, 2.0}));
  readback.push(torch::tensor({4.0, 5.0, 6.0}, torch::kFloat64));  // reuses the first slot
  EXPECT_EQ(readback.pop(), (std::vector<double>{3.0}));
  EXPECT_EQ(readback.pop(), (std::vector<double>{4.0, 5.0, 6.0}));
  EXPECT_EQ(readback.pending(), 0);
}

TEST(HostReadback, KeepsTheValuesOfThePushNotLaterWrites) {
  // The trainer pushes a view of the gradient bucket's stop slot, which the next step zeroes.
  HostReadback readback(kCpu);
  auto bucket = torch::tensor({7.0, 1.0}, torch::kFloat64);
  readback.push(bucket.narrow(0, 1, 1));
  bucket.zero_();
  EXPECT_EQ(readback.pop(), (std::vector<double>{1.0}));
}

TEST(HostReadback, RefusesMorePendingValuesThanSlotsAndPopsOfNothing) {
  HostReadback readback(kCpu, /*capacity=*/1);
  EXPECT_THROW(readback.pop(), c10::Error);
  readback.push(torch::tensor({1.0}, torch::kFloat64));
  EXPECT_THROW(readback.push(torch::tensor({2.0}, torch::kFloat64)), c10::Error);
  EXPECT_THROW(HostReadback(kCpu).push(torch::tensor({1.0f})), c10::Error) << "float32, not float64";
}

TEST(StreamTimer, SumsTheIntervalsSinceTheLastTake) {
  StreamTimer timer(kCpu);
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    timer.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    timer.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // outside the intervals
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double total = timer.take_seconds();
  EXPECT_GE(total, 0.060);
  // Sleeps never end early: the gaps took at least 90 ms of the wall time.
  EXPECT_LE(total, wall - 0.090) << "time between the intervals is not counted";
  EXPECT_EQ(timer.take_seconds(), 0.0) << "take_seconds() starts a new sum";
}

// On a GPU (skipped elsewhere; scripts/gpu-check.sh runs them): the same behaviour with the
// values, copies and timings queued on CUDA streams.
#define DDPLAB_REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

TEST(HostReadback, OnCudaReadsValuesQueuedBehindWork) {
  DDPLAB_REQUIRE_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  HostReadback readback(gpu);
  auto a = torch::randn({2048, 2048}, torch::TensorOptions().device(gpu));
  std::vector<double> expected;
  for (int k = 0; k < 2; ++k) {
    auto b = a;
    for (int i = 0; i < 8; ++i) b = torch::tanh(b.mm(a) / 64);  // queued work ahead of the copy
    auto values = torch::stack({b.sum(), b.abs().max()}).to(torch::kFloat64);
    readback.push(values);
    expected = {values[0].item<double>(), values[1].item<double>()};
    EXPECT_EQ(readback.pop(), expected) << "push " << k;
  }
  auto bucket = torch::tensor({7.0, 1.0}, torch::TensorOptions().dtype(torch::kFloat64).device(gpu));
  readback.push(bucket.narrow(0, 1, 1));
  bucket.zero_();  // queued after the copy: the value pushed is read
  EXPECT_EQ(readback.pop(), (std::vector<double>{1.0}));
}

TEST(StreamTimer, OnCudaMeasuresTheStreamNotTheHost) {
  DDPLAB_REQUIRE_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  StreamTimer timer(gpu);
  auto a = torch::randn({4096, 4096}, torch::TensorOptions().device(gpu));
  torch::cuda::synchronize();
  const auto begin = std::chrono::steady_clock::now();
  for (int k = 0; k < 3; ++k) {
    timer.start();
    auto b = a;
    for (int i = 0; i < 20; ++i) b = b.mm(a) / 64;
    timer.stop();
  }
  const double queued = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double total = timer.take_seconds();
  torch::cuda::synchronize();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // Queuing the matmuls takes the host far less time than the GPU takes to run them; a host clock
  // around the launches would measure `queued`.
  EXPECT_LE(total, wall);
  EXPECT_GT(total, 0.5 * wall) << "the stream's time, not the launch time (queued in " << queued << " s)";
  EXPECT_EQ(timer.take_seconds(), 0.0);
}

TEST(BatchMover, OnCudaDeliversThePinnedBatchToTheComputeStream) {
  DDPLAB_REQUIRE_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  BatchMover mover(gpu);
  for (int k = 0; k < 3; ++k) {
    auto x = torch::randn({64, 1, 28, 28}).pin_memory();
    auto y = torch::randint(0, 10, {64}, torch::kInt64).pin_memory();
    mover.stage(x, y);
    auto [dx, dy] = mover.take();
    ASSERT_TRUE(dx.is_cuda() && dy.is_cuda());
    EXPECT_TRUE(torch::equal(dx.cpu(), x)) << "batch " << k;
    EXPECT_TRUE(torch::equal(dy.cpu(), y)) << "batch " << k;
  }
}

}  // namespace
}  // namespace ddplab::runtime
