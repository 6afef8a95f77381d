#include "ddplab/distributed/comm_hook.h"

#include <atomic>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/distributed/agreement.h"
#include "ddplab/distributed/grad_reducer.h"
#include "distributed/ranks.h"

namespace ddplab::distributed {
namespace {

// A hook that is not DDP's: the element-wise maximum over ranks, counting its launches and
// finishes. Only through the seam can it change what the optimizer would see.
class MaxHook final : public CommHook {
 public:
  explicit MaxHook(std::atomic<int>& calls) : calls_(calls) {}
  std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) override {
    ++calls_;
    std::vector<at::Tensor> tensors{bucket.flat};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    return {comm.backend->allreduce(tensors, options)};
  }
  void finish(Comm&, const BucketView&) override { ++calls_; }
  int64_t payload_bytes(const BucketView& bucket) const override { return bucket.flat.numel(); }

 private:
  std::atomic<int>& calls_;
};

TEST(CommHook, ARegisteredHookCarriesEveryBucketAndTheOptimizerSeesItsResult) {
  std::vector<float> a_grad(2), b_grad(2);
  std::vector<int> stop(2);
  std::atomic<int> calls{0};
  int64_t payload = 0;
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    // 300000 floats each: a and b land in different buckets (2 MiB cap).
    auto a = torch::zeros({300000}, torch::requires_grad());
    auto b = torch::zeros({300000}, torch::requires_grad());
    GradReducerOptions options;
    options.bucket_mb = 2.0;
    GradReducer reducer({a, b}, comm, options);
    ASSERT_EQ(reducer.bucket_layout().size(), 2u);
    reducer.register_comm_hook(std::make_unique<MaxHook>(calls));
    reducer.request_stop(r == 1);
    reducer.prepare_for_backward();
    const double k = r == 0 ? 1.0 : 3.0;  // rank 0: grad a = 1, b = 2; rank 1: a = 3, b = 6
    ((a * k).sum() + (b * (2 * k)).sum()).backward();
    reducer.finalize();
    a_grad[static_cast<size_t>(r)] = a.grad()[0].item<float>();
    b_grad[static_cast<size_t>(r)] = b.grad()[0].item<float>();
    stop[static_cast<size_t>(r)] = reducer.stop_flag().item<double>() > 0;
    if (r == 0) payload = reducer.payload_bytes();
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(a_grad[r], 1.5f) << "max(1/2, 3/2): divided by N first, then the hook's maximum";
    EXPECT_FLOAT_EQ(b_grad[r], 3.0f);
    EXPECT_EQ(stop[r], 1) << "rank 1's stop reached rank " << r << " in the hook's control slots";
  }
  EXPECT_EQ(calls.load(), 2 * 2 * 2) << "a launch and a finish per bucket per rank";
  EXPECT_EQ(payload, 2 * 300000 + 2 + 2) << "payload_bytes() is the hook's: here its element count";
}

// The registry makes every built-in hook, and each sums N replicas in one process (simulated
// replicas) as its all-reduce does: fp32 as it is, a cast wire rounding each contribution and each
// addition to its dtype; PowerSGD cannot be simulated.
TEST(CommHook, TheRegistryMakesEveryBuiltinHookAndSaysHowItSumsInOneProcess) {
  const auto a = torch::tensor({1.0f + 1.0f / 256, 3.0f}), b = torch::tensor({1.0f / 512, 1.0f / 3});
  const std::pair<BuiltinCommHook, at::ScalarType> cast[] = {{BuiltinCommHook::kAllreduce, at::kFloat},
                                                             {BuiltinCommHook::kBf16Compress, at::kBFloat16},
                                                             {BuiltinCommHook::kFp16Compress, at::kHalf}};
  for (const auto& [name, dtype] : cast) {
    const auto hook = make_comm_hook(name);
    ASSERT_TRUE(hook->simulates());
    ASSERT_EQ(hook->sum_dtype(at::kFloat), dtype);
    at::Tensor sum = torch::zeros({2}, dtype);
    hook->add_replica(sum, a);
    hook->add_replica(sum, b);
    EXPECT_TRUE(torch::equal(sum, a.to(dtype) + b.to(dtype))) << static_cast<int>(name);
  }
  EXPECT_FALSE(make_comm_hook(BuiltinCommHook::kPowerSgd)->simulates());
}

TEST(ControlSlots, AFlagAnyRankSetsIsAgreedByEveryRankAndTheLocalNormsAreSummed) {
  const ControlSlots slots({/*diverged=*/true, /*local_norm=*/true});
  ASSERT_EQ(slots.size(), 3);
  std::vector<int> stop(2), diverged(2);
  std::vector<double> norm(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    auto t = torch::zeros({slots.size()}, torch::kFloat32);
    slots.write(t, {/*stop=*/r == 1, /*diverged=*/false});
    slots.write_local_norm(t, torch::full({}, r == 0 ? 2.0 : 5.0));
    allreduce_sum(*comm, t);
    const Agreement agreed = slots.read(t);
    stop[static_cast<size_t>(r)] = agreed.stop;
    diverged[static_cast<size_t>(r)] = agreed.diverged;
    norm[static_cast<size_t>(r)] = slots.local_norm(t).item<double>();
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(stop[r], 1);
    EXPECT_EQ(diverged[r], 0) << "no rank set it";
    EXPECT_EQ(norm[r], 7.0);
  }
  EXPECT_FALSE(ControlSlots({}).read(torch::ones({1})).diverged) << "a layout without the slot never diverges";
}

}  // namespace
}  // namespace ddplab::distributed
