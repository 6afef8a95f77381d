#include "ddplab/models/batch_norm.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::models {
namespace {

// An in-process all-reduce for `n` threads: each call blocks until all n have contributed, then
// every caller gets the sum. Calls pair up by order, as a real process group's do.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n) {}
  void sum(at::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    total_ = arrived_ == 0 ? t.clone() : total_ + t;
    if (++arrived_ == n_) {
      result_ = total_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    t.copy_(result_);
  }

 private:
  int n_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  at::Tensor total_, result_;
};

std::shared_ptr<const ReplicaSum> group_sum(ThreadGroup& g) {
  return std::make_shared<const ReplicaSum>([&g](at::Tensor& t) { g.sum(t); });
}

// A fixed, non-trivial loss: mean over samples of sum(y * probe); `probe` [C, H, W].
at::Tensor loss_of(const at::Tensor& y, const at::Tensor& probe) { return (y * probe).sum({1, 2, 3}).mean(); }

TEST(BatchNorm, PerReplicaModeIsTorchsBatchNorm2d) {
  torch::manual_seed(2);
  BatchNorm2d ours(5, /*sync=*/false);
  torch::nn::BatchNorm2d theirs(5);
  auto x = torch::randn({4, 5, 3, 3}) * 3 + 1;
  for (int step = 0; step < 2; ++step) {
    EXPECT_TRUE(torch::equal(ours->forward(x), theirs->forward(x)));
  }
  EXPECT_TRUE(torch::equal(ours->running_mean, theirs->running_mean));
  EXPECT_TRUE(torch::equal(ours->running_var, theirs->running_var));
  EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), 2);
  ours->eval();
  theirs->eval();
  EXPECT_TRUE(torch::equal(ours->forward(x), theirs->forward(x)));
  // Same names as torch's module, so state dicts read the same.
  std::vector<std::string> buffers;
  for (const auto& b : ours->named_buffers()) buffers.push_back(b.key());
  EXPECT_EQ(buffers, (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
}

TEST(BatchNorm, SyncedOnOneReplicaMatchesTorchForwardBackwardAndRunningStats) {
  torch::manual_seed(3);
  BatchNorm2d ours(4, /*sync=*/true);
  torch::nn::BatchNorm2d theirs(4);
  {
    torch::NoGradGuard no_grad;
    auto w = torch::rand({4}) + 0.5, b = torch::randn({4});
    ours->weight.copy_(w), theirs->weight.copy_(w);
    ours->bias.copy_(b), theirs->bias.copy_(b);
  }
  auto x = (torch::randn({6, 4, 5, 5}) * 2 + 3).requires_grad_();
  auto x2 = x.detach().clone().requires_grad_();
  auto probe = torch::randn({4, 5, 5});
  auto a = ours->forward(x), b = theirs->forward(x2);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max();
  loss_of(a, probe).backward();
  loss_of(b, probe).backward();
  EXPECT_TRUE(torch::allclose(x.grad(), x2.grad(), 1e-5, 1e-6)) << (x.grad() - x2.grad()).abs().max();
  EXPECT_TRUE(torch::allclose(ours->weight.grad(), theirs->weight.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(ours->bias.grad(), theirs->bias.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(ours->running_mean, theirs->running_mean, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(ours->running_var, theirs->running_var, 1e-6, 1e-6));
}

TEST(BatchNorm, SumOverReplicasSumsValuesForwardAndGradientsBackward) {
  // Two "replicas" in threads, each with its own local tensor and its own loss.
  ThreadGroup group(2);
  auto sum = group_sum(group);
  std::vector<at::Tensor> locals = {torch::tensor({1.0, 2.0}, torch::kDouble).requires_grad_(),
                                    torch::tensor({10.0, 20.0}, torch::kDouble).requires_grad_()};
  std::vector<at::Tensor> totals(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      totals[r] = sum_over_replicas(locals[r], sum);
      // loss_r = (r + 1) * sum(total * [1, 3]); d(loss_0 + loss_1)/d local = 3 * [1, 3]
      ((r + 1) * (totals[r] * torch::tensor({1.0, 3.0}, torch::kDouble)).sum()).backward();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(totals[r].detach(), torch::tensor({11.0, 22.0}, torch::kDouble)));
    EXPECT_TRUE(torch::equal(locals[r].grad(), torch::tensor({3.0, 9.0}, torch::kDouble))) << locals[r].grad();
  }
  // Without a group it is the identity.
  auto x = torch::ones({3});
  EXPECT_TRUE(torch::equal(sum_over_replicas(x, nullptr), x));
}

TEST(BatchNorm, SyncedReplicasOfHalfBatchesEqualOneReplicaOfTheWholeBatch) {
  torch::manual_seed(4);
  const int64_t batch = 8, channels = 3;
  auto x = torch::randn({batch, channels, 4, 4}) * 2 + 0.5;
  auto probe = torch::randn({channels, 4, 4});
  // One replica, the whole batch.
  BatchNorm2d whole(channels, true);
  auto xw = x.clone().requires_grad_();
  auto yw = whole->forward(xw);
  loss_of(yw, probe).backward();
  // Two replicas in threads, half the batch each, losses averaged as DDP's mean reduction does.
  for (bool sync : {true, false}) {
    ThreadGroup group(2);
    auto sum = group_sum(group);
    std::vector<BatchNorm2d> halves = {BatchNorm2d(channels, sync, sum), BatchNorm2d(channels, sync, sum)};
    std::vector<at::Tensor> xs(2), ys(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        xs[r] = x.slice(0, r * batch / 2, (r + 1) * batch / 2).clone().requires_grad_();
        ys[r] = halves[r]->forward(xs[r]);
        loss_of(ys[r], probe).backward();
      });
    }
    for (auto& t : threads) t.join();
    auto y = torch::cat({ys[0], ys[1]}).detach();
    // Each replica's gradient is of its own loss (mean over B/2 = 2x the whole-batch weight of a
    // sample); DDP's mean over the 2 replicas halves it.
    auto gx = torch::cat({xs[0].grad(), xs[1].grad()}) / 2;
    auto gw = (halves[0]->weight.grad() + halves[1]->weight.grad()) / 2;
    auto rm = halves[0]->running_mean;
    if (sync) {
      EXPECT_TRUE(torch::allclose(y, yw.detach(), 1e-6, 1e-6)) << (y - yw).abs().max();
      EXPECT_TRUE(torch::allclose(gx, xw.grad(), 1e-6, 1e-7)) << (gx - xw.grad()).abs().max();
      EXPECT_TRUE(torch::allclose(gw, whole->weight.grad(), 1e-5, 1e-6));
      EXPECT_TRUE(torch::allclose(rm, whole->running_mean, 1e-6, 1e-7));
      EXPECT_TRUE(torch::allclose(halves[1]->running_var, whole->running_var, 1e-6, 1e-7));
    } else {
      // Per-replica statistics: the effect sync_bn removes.
      EXPECT_FALSE(torch::allclose(y, yw.detach(), 1e-3, 1e-3));
      EXPECT_FALSE(torch::allclose(gx, xw.grad(), 1e-3, 1e-4));
    }
  }
}

}  // namespace
}  // namespace ddplab::models
