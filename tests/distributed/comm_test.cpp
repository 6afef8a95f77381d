// Collectives through Comm: gloo between real ranks, and NCCL with the one rank a single GPU
// allows (NCCL refuses two ranks on one device; the NCCL tests are skipped without a GPU and run
// in scripts/gpu-check.sh).
#include "ddplab/distributed/comm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/version.h"
#include "ddplab/distributed/world.h"
#include "ddplab/runtime/device.h"
#include "distributed/ranks.h"
#include "test_util.h"

namespace ddplab::distributed {
namespace {

TEST(Comm, HostTensorsMoveNowhereUnderGloo) {
  testing::run_ranks(2, [](const std::shared_ptr<Comm>& comm) {
    auto t = torch::full({3}, static_cast<double>(comm->rank + 1), torch::kFloat64);
    allreduce_sum(*comm, t);
    EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0, torch::kFloat64)));
    auto gathered = allgather(*comm, torch::full({2}, comm->rank, torch::kInt64));
    ASSERT_EQ(gathered.size(), 2u);
    EXPECT_EQ(gathered[1][0].item<int64_t>(), 1);
  });
}

// The BatchNorm buffers' broadcast before every forward: the root's values on every rank, each
// call, in the tensors themselves (float and int64 alike), with at most one operator more per
// tensor more (the CPU's multi-tensor copy copies them one by one; broadcast_coalesced took seven).
TEST(Comm, ARepeatedBroadcastGivesTheRootsValuesWithAtMostOneOperatorPerTensor) {
  testing::run_ranks(2, [](const std::shared_ptr<Comm>& comm) {
    auto tensors_of = [&](int n) {
      std::vector<at::Tensor> ts;
      for (int i = 0; i < n; ++i) ts.push_back(torch::full({2, i + 1}, 10.0 * comm->rank + i));
      ts.push_back(torch::full({}, comm->rank + 5, torch::kInt64));  // num_batches_tracked
      return ts;
    };
    auto few = tensors_of(2), many = tensors_of(29);
    RepeatedBroadcast broadcast_few(few), broadcast_many(many);
    for (int call = 0; call < 2; ++call) {
      if (comm->rank == 0) few[0].fill_(100.0 + call);  // the root's values as they are at each call
      broadcast_few(*comm, 0);
      EXPECT_TRUE(torch::equal(few[0], torch::full({2, 1}, 100.0 + call))) << "call " << call;
      EXPECT_TRUE(torch::equal(few[1], torch::full({2, 2}, 1.0)));
      EXPECT_EQ(few[2].item<int64_t>(), 5) << "int64 travels exactly";
    }
    const int64_t extra = testing::operators_dispatched([&] { broadcast_many(*comm, 0); }) -
                          testing::operators_dispatched([&] { broadcast_few(*comm, 0); });
    EXPECT_LE(extra, static_cast<int64_t>(many.size() - few.size())) << "rank " << comm->rank;
    EXPECT_TRUE(torch::equal(many[28], torch::full({2, 29}, 28.0)));
  });
}

TEST(Comm, NcclWorldOfOneOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(built_with_nccl()) << "a CUDA build of ddplab without the NCCL backend";
  int port = 0;
  auto store = host_store("127.0.0.1", std::chrono::seconds(30), &port);
  World world;  // rank 0 of 1, GPU 0
  world.master_port = port;
  runtime::select_device(c10::Device(c10::kCUDA, 0));
  world.agent_store = true;
  auto comm = make_comm(world, config::Backend::kNccl, std::chrono::seconds(30));
  EXPECT_TRUE(comm->device.is_cuda());
  auto on_gpu = torch::arange(5, torch::TensorOptions().dtype(torch::kFloat32).device(comm->device));
  allreduce_sum(*comm, on_gpu);
  EXPECT_TRUE(torch::equal(on_gpu.cpu(), torch::arange(5, torch::kFloat32)));
  // Host tensors (metrics, audits) travel to the GPU and back.
  auto on_host = torch::tensor({2.0, -1.0}, torch::kFloat64);
  allreduce_max(*comm, on_host);
  EXPECT_TRUE(on_host.device().is_cpu());
  EXPECT_TRUE(torch::equal(on_host, torch::tensor({2.0, -1.0}, torch::kFloat64)));
  auto a = torch::ones({2, 2}), b = torch::zeros({3}, torch::kInt64);
  broadcast_coalesced(*comm, {a, b}, 0);
  EXPECT_TRUE(torch::equal(a, torch::ones({2, 2})));
  auto gathered = allgather(*comm, torch::tensor({7}, torch::kInt64));
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered[0].device().is_cpu());
  EXPECT_EQ(gathered[0][0].item<int64_t>(), 7);
  barrier(*comm);
  shutdown(*comm);
}

}  // namespace
}  // namespace ddplab::distributed
