#include "ddplab/train/simulated.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/distributed/grad_reducer.h"

namespace ddplab::train {
namespace {

namespace nn = torch::nn;

// A small test module: linear -> batch norm (optional) -> dropout (optional) -> linear.
struct Net : nn::Module {
  Net(bool bn, double dropout) : dropout_(dropout) {
    fc1 = register_module("fc1", nn::Linear(4, 6));
    if (bn) norm = register_module("norm", nn::BatchNorm1d(6));
    fc2 = register_module("fc2", nn::Linear(6, 2));
  }
  at::Tensor forward(const at::Tensor& x) {
    auto h = fc1->forward(x);
    if (norm) h = norm->forward(h);
    h = torch::dropout(torch::relu(h), dropout_, is_training());
    return fc2->forward(h);
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::BatchNorm1d norm{nullptr};
  double dropout_;
};

void zero_grads(nn::Module& m) {
  for (auto& p : m.parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();
}

std::vector<at::Tensor> grads_of(nn::Module& m) {
  std::vector<at::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().clone());
  return out;
}

// One simulated step over `shards` (loss: sum of squared outputs).
void simulated_step(Net& net, SimulatedReplicas& sim, const std::vector<at::Tensor>& shards) {
  sim.begin_step();
  for (size_t k = 0; k < shards.size(); ++k) {
    sim.begin_replica(static_cast<int>(k));
    zero_grads(net);
    net.forward(shards[k]).pow(2).sum().backward();
    sim.end_replica(static_cast<int>(k));
  }
  sim.end_step();
}

TEST(SimulatedReplicas, GradientIsWhatTheAllReduceLeaves) {
  for (bool mean : {true, false}) {
    torch::manual_seed(5);
    Net net(/*bn=*/false, /*dropout=*/0.0);
    auto x = torch::randn({6, 4});
    std::vector<at::Tensor> shards{x.narrow(0, 0, 2), x.narrow(0, 2, 2), x.narrow(0, 4, 2)};
    // Each shard's gradient on its own, as each process computes it.
    std::vector<std::vector<at::Tensor>> per_shard;
    double local_sq = 0;
    for (const auto& s : shards) {
      zero_grads(net);
      net.forward(s).pow(2).sum().backward();
      per_shard.push_back(grads_of(net));
      for (const auto& g : per_shard.back()) local_sq += g.pow(2).sum().item<double>();
    }
    SimulatedReplicas sim(net, net.parameters(), {1, 2, 3}, mean ? config::Reduce::kMean : config::Reduce::kSum,
                          torch::kCPU);
    simulated_step(net, sim, shards);
    auto params = net.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto sum = per_shard[0][i] + per_shard[1][i] + per_shard[2][i];
      auto expect = mean ? (per_shard[0][i] / 3 + per_shard[1][i] / 3 + per_shard[2][i] / 3) : sum;
      EXPECT_TRUE(torch::allclose(params[i].grad(), expect, 1e-6, 1e-7)) << "mean " << mean << " param " << i;
    }
    EXPECT_NEAR(sim.local_norm_squared_mean().item<double>(), local_sq / 3, 1e-5 * local_sq);
  }
}

TEST(SimulatedReplicas, Bf16WireRoundsEachShardsContributionAndTheirSum) {
  torch::manual_seed(5);
  Net net(/*bn=*/false, /*dropout=*/0.0);
  auto x = torch::randn({6, 4});
  std::vector<at::Tensor> shards{x.narrow(0, 0, 2), x.narrow(0, 2, 2), x.narrow(0, 4, 2)};
  std::vector<std::vector<at::Tensor>> per_shard;
  for (const auto& s : shards) {
    zero_grads(net);
    net.forward(s).pow(2).sum().backward();
    per_shard.push_back(grads_of(net));
  }
  SimulatedReplicas sim(net, net.parameters(), {1, 2, 3}, config::Reduce::kMean, torch::kCPU,
                        distributed::BuiltinCommHook::kBf16Compress);
  simulated_step(net, sim, shards);
  auto params = net.parameters();
  bool rounded = false;
  for (size_t i = 0; i < params.size(); ++i) {
    auto wire = [&](int k) { return (per_shard[k][i] / 3).to(torch::kBFloat16); };
    // bf16 + bf16 rounds to bf16 after each addition, as a bf16 all-reduce's reduction does.
    const auto expect = ((wire(0) + wire(1)) + wire(2)).to(torch::kFloat32);
    EXPECT_TRUE(torch::equal(params[i].grad(), expect)) << "param " << i;
    EXPECT_EQ(params[i].grad().scalar_type(), torch::kFloat32);
    rounded = rounded || !torch::equal(expect, per_shard[0][i] / 3 + per_shard[1][i] / 3 + per_shard[2][i] / 3);
  }
  EXPECT_TRUE(rounded) << "the fp32 mean differs from what the bf16 wire leaves";
}

TEST(SimulatedReplicas, EachReplicaDrawsTheDropoutStreamOfItsProcess) {
  torch::manual_seed(5);
  Net net(/*bn=*/false, /*dropout=*/0.5);
  const std::vector<uint64_t> seeds{11, 12};
  SimulatedReplicas sim(net, net.parameters(), seeds, config::Reduce::kMean, torch::kCPU);
  auto ones = torch::ones({8, 6});
  // Replica k's masks at steps 1 and 2, as a process seeded with seeds[k] draws them.
  std::vector<std::vector<at::Tensor>> expect(2);
  for (int k = 0; k < 2; ++k) {
    torch::manual_seed(seeds[k]);
    expect[k].push_back(torch::dropout(ones, 0.5, true));
    expect[k].push_back(torch::dropout(ones, 0.5, true));
  }
  torch::manual_seed(999);  // whatever the process's own stream is
  for (int step = 0; step < 2; ++step) {
    sim.begin_step();
    for (int k = 0; k < 2; ++k) {
      sim.begin_replica(k);
      auto mask = torch::dropout(ones, 0.5, true);
      EXPECT_TRUE(torch::equal(mask, expect[k][step])) << "replica " << k << " step " << step;
      sim.end_replica(k);
    }
    sim.end_step();
  }
  EXPECT_FALSE(torch::equal(expect[0][0], expect[1][0])) << "the replicas' streams differ";
  ASSERT_EQ(sim.rng_states().size(), 2u);
}

TEST(SimulatedReplicas, BatchNormStartsEveryReplicaFromRankZerosBuffersAndKeepsRankZeros) {
  torch::manual_seed(5);
  Net net(/*bn=*/true, /*dropout=*/0.0);
  net.train();
  SimulatedReplicas sim(net, net.parameters(), {1, 2}, config::Reduce::kMean, torch::kCPU);
  auto x0 = torch::randn({5, 4}), x1 = torch::randn({5, 4}) * 3 + 2;
  const auto start_mean = net.norm->running_mean.clone();

  // References: a copy of the BN layer fed one shard from the same starting buffers.
  auto reference = [&](const at::Tensor& x) {
    nn::BatchNorm1d bn(6);
    bn->train();
    {
      torch::NoGradGuard no_grad;
      bn->running_mean.copy_(start_mean);
      bn->running_var.copy_(net.norm->running_var);
    }
    torch::NoGradGuard no_grad;
    auto out = bn->forward(net.fc1->forward(x));
    return std::make_pair(out, bn->running_mean.clone());
  };
  const auto [out0, mean_after0] = reference(x0);
  const auto [out1, mean_after1] = reference(x1);

  sim.begin_step();
  sim.begin_replica(0);
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(net.norm->forward(net.fc1->forward(x0)), out0, 1e-5, 1e-6)) << "ghost batch norm";
  }
  sim.end_replica(0);
  sim.begin_replica(1);
  EXPECT_TRUE(torch::equal(net.norm->running_mean, start_mean)) << "replica 1 starts from rank 0's step-start buffers";
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(net.norm->forward(net.fc1->forward(x1)), out1, 1e-5, 1e-6));
  }
  EXPECT_TRUE(torch::allclose(net.norm->running_mean, mean_after1));
  sim.end_replica(1);
  sim.end_step();
  EXPECT_TRUE(torch::allclose(net.norm->running_mean, mean_after0)) << "rank 0's updated buffers are kept";
  EXPECT_FALSE(torch::allclose(mean_after0, mean_after1));
  EXPECT_EQ(net.norm->num_batches_tracked.item<int64_t>(), 1);
}

// Two replicas, a parameter only the first shard uses: its summed gradient lands in its GradReducer
// bucket, so the reduced gradient's norm (grad_norm, the divergence check and the noise scale
// read it) holds what the optimizer steps on. Before, the last shard's finalize() left its .grad
// undefined and end_step() gave it a fresh tensor: the norm left it out (here 192 where the step used 240).
TEST(SimulatedReplicas, AParameterTheLastShardLeftUnusedKeepsItsBucketView) {
  auto a = torch::full({3}, 2.0).requires_grad_();
  auto b = torch::full({3}, 2.0).requires_grad_();
  const std::vector<at::Tensor> params{a, b};
  distributed::GradReducer sync(params, /*comm=*/nullptr);
  nn::Module holder;
  SimulatedReplicas sim(holder, params, {1, 2}, config::Reduce::kSum, torch::kCPU);
  sim.begin_step();
  for (int k = 0; k < 2; ++k) {
    sim.begin_replica(k);
    sync.prepare_for_backward();
    const auto loss = k == 0 ? (a * a).sum() + (b * b).sum() : (a * a).sum();
    loss.backward();
    sync.finalize();
    sim.end_replica(k);
  }
  sim.end_step(&sync);
  ASSERT_TRUE(b.grad().defined());
  EXPECT_TRUE(torch::equal(b.grad(), torch::full({3}, 4.0))) << "shard 0's 2b, summed";
  EXPECT_TRUE(torch::equal(a.grad(), torch::full({3}, 8.0))) << "2a from each shard";
  EXPECT_EQ(b.grad().data_ptr(), sync.grad_view(1).data_ptr()) << "b's .grad is its bucket view";
  EXPECT_DOUBLE_EQ(sync.grad_norm_squared().item<double>(), 3 * 64.0 + 3 * 16.0);
}

}  // namespace
}  // namespace ddplab::train
