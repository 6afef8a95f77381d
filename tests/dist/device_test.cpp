#include "ddplab/dist/device.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::dist {
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

}  // namespace
}  // namespace ddplab::dist
