#include "ddplab/distributed/grad_reducer.h"

#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "distributed/ranks.h"
#include "test_util.h"

namespace ddplab::distributed {
namespace {

std::vector<at::Tensor> params_of_sizes(const std::vector<int64_t>& numels) {
  std::vector<at::Tensor> ps;
  for (int64_t n : numels) ps.push_back(torch::zeros({n}, torch::requires_grad()));
  return ps;
}

GradReducerOptions small_buckets() {
  GradReducerOptions o;
  o.first_bucket_mb = 1.0;
  o.bucket_mb = 2.0;
  return o;
}

// Gradient bytes of bucket b: its parameters' (the reducer's extra slots not counted).
int64_t bucket_bytes(const GradReducer& sync, const std::vector<at::Tensor>& ps, size_t b) {
  int64_t bytes = 0;
  const std::vector<std::vector<size_t>> layout = sync.bucket_layout();  // a copy: the loop outlives no temporary
  for (size_t i : layout[b]) bytes += ps[i].numel() * ps[i].element_size();
  return bytes;
}

// True when `t`'s storage lies inside [base, base + bytes).
bool inside(const at::Tensor& t, const char* base, int64_t bytes) {
  const char* p = static_cast<const char*>(t.data_ptr());
  return p >= base && p + t.numel() * t.element_size() <= base + bytes;
}

TEST(GradReducer, BucketsTakeParametersInReverseOrderFirstCappedAtOneMiB) {
  // 300000 floats = 1,200,000 bytes each: one reaches 1 MiB (1,048,576) alone,
  // two reach 2 MiB (2,097,152) together.
  auto ps = params_of_sizes({300000, 300000, 300000, 300000, 300000});
  GradReducer sync(ps, nullptr, small_buckets());
  ASSERT_EQ(sync.bucket_layout().size(), 3u);
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{4}));
  EXPECT_EQ(sync.bucket_layout()[1], (std::vector<size_t>{3, 2}));
  EXPECT_EQ(sync.bucket_layout()[2], (std::vector<size_t>{1, 0}));
  EXPECT_EQ(bucket_bytes(sync, ps, 0), 1200000);
  EXPECT_EQ(bucket_bytes(sync, ps, 1), 2400000);
}

TEST(GradReducer, BucketClosesOnceItReachesItsCap) {
  // 100000 floats = 400,000 bytes: the first bucket closes at 3 (1.2 MB >= 1 MiB), the next
  // ones at 6 (2.4 MB >= 2 MiB; 5 make 2.0 MB < 2 MiB).
  auto ps = params_of_sizes(std::vector<int64_t>(10, 100000));
  GradReducer sync(ps, nullptr, small_buckets());
  ASSERT_EQ(sync.bucket_layout().size(), 3u);
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{9, 8, 7}));
  EXPECT_EQ(sync.bucket_layout()[1], (std::vector<size_t>{6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(sync.bucket_layout()[2], (std::vector<size_t>{0}));
}

TEST(GradReducer, SmallModelFitsInOneBucket) {
  auto ps = params_of_sizes({10, 20, 30});
  GradReducer sync(ps, nullptr);
  ASSERT_EQ(sync.bucket_layout().size(), 1u);
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(bucket_bytes(sync, ps, 0), 60 * 4);
}

// A bucket holds one dtype (DDP's per-dtype buckets); before, a float64 parameter's gradient was a
// view into a float32 bucket. Two ranks reduce both dtypes, each gradient in its parameter's dtype.
TEST(GradReducer, EachDtypeFillsBucketsOfItsOwn) {
  std::vector<std::vector<size_t>> layout(2);
  std::vector<std::vector<double>> grads(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    auto a = torch::zeros({3}, torch::requires_grad());
    auto b = torch::zeros({2}, torch::dtype(torch::kFloat64).requires_grad(true));
    auto c = torch::zeros({4}, torch::requires_grad());
    GradReducer sync({a, b, c}, comm);
    EXPECT_EQ(sync.bucket_layout().size(), 2u);
    for (const auto& bucket : sync.bucket_layout())
      for (size_t i : bucket) layout[r].push_back(i);
    sync.prepare_for_backward();
    ((a * (r + 1.0)).sum() + (b * (10.0 * (r + 1))).sum() + (c * 100.0).sum()).backward();
    sync.finalize();
    EXPECT_EQ(b.grad().scalar_type(), torch::kFloat64);
    grads[r] = {a.grad()[0].item<double>(), b.grad()[1].item<double>(), c.grad()[3].item<double>()};
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(layout[r], (std::vector<size_t>{2, 0, 1})) << "rank " << r;
    EXPECT_EQ(grads[r], (std::vector<double>{1.5, 15.0, 100.0})) << "rank " << r;  // the means over ranks
  }
}

// A checkpoint's layout (rebuilt_layout()) rebuilds the buckets in its order; a layout that is
// not a permutation of this model's parameters is refused.
TEST(GradReducer, ARestoredLayoutOrdersTheBucketsAndABadOneIsRefused) {
  auto ps = params_of_sizes({10, 20, 30});
  GradReducer sync(ps, nullptr);
  EXPECT_TRUE(sync.rebuilt_layout().empty()) << "not rebuilt yet";
  sync.restore_layout({0, 2, 1});
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{0, 2, 1}));
  EXPECT_EQ(sync.rebuilt_layout(), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_NE(testing::error_of([&] { sync.restore_layout({0, 0, 1}); }).find("parameter 0"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { sync.restore_layout({0, 1}); }).find("leaves out parameter 2"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { sync.restore_layout({0, 1, 7}); }).find("parameter 7"), std::string::npos);
}

TEST(GradReducer, ParametersWithoutRequiresGradGetNoBucket) {
  std::vector<at::Tensor> ps{torch::zeros({4}, torch::requires_grad()), torch::zeros({4}),
                             torch::zeros({4}, torch::requires_grad())};
  GradReducer sync(ps, nullptr);
  ASSERT_EQ(sync.bucket_layout().size(), 1u);
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{2, 0}));
}

TEST(GradReducer, GradientsEqualAutogradAndAreBucketViews) {
  torch::manual_seed(3);
  auto w1 = torch::randn({300000}, torch::requires_grad());
  auto w2 = torch::randn({300000}, torch::requires_grad());
  auto w3 = torch::randn({300000}, torch::requires_grad());
  auto x = torch::randn({300000});

  auto loss_of = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return ((a * x).sum() * 2 + (b * b).sum() + (c * a).sum() * 0.5);
  };
  // Reference gradients from plain autograd on copies.
  auto r1 = w1.detach().clone().requires_grad_(true);
  auto r2 = w2.detach().clone().requires_grad_(true);
  auto r3 = w3.detach().clone().requires_grad_(true);
  loss_of(r1, r2, r3).backward();

  std::vector<at::Tensor> ps{w1, w2, w3};
  GradReducer sync(ps, nullptr, small_buckets());
  ASSERT_EQ(sync.bucket_layout().size(), 2u);  // {2}, {1, 0}
  sync.prepare_for_backward();
  std::vector<const void*> before;
  for (auto& p : ps) before.push_back(p.grad().data_ptr());
  loss_of(w1, w2, w3).backward();
  sync.finalize();

  EXPECT_TRUE(torch::allclose(w1.grad(), r1.grad()));
  EXPECT_TRUE(torch::allclose(w2.grad(), r2.grad()));
  EXPECT_TRUE(torch::allclose(w3.grad(), r3.grad()));
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps[i].grad().data_ptr(), before[i]) << "param " << i;

  // Bucket 1 holds params 1 then 0 contiguously in one flat buffer.
  const char* base = static_cast<const char*>(w2.grad().data_ptr());
  EXPECT_TRUE(inside(w2.grad(), base, bucket_bytes(sync, ps, 1)));
  EXPECT_TRUE(inside(w1.grad(), base, bucket_bytes(sync, ps, 1)));
  EXPECT_EQ(static_cast<const char*>(w1.grad().data_ptr()), base + 300000 * 4);
  EXPECT_FALSE(inside(w3.grad(), base, bucket_bytes(sync, ps, 1)));

  // The squared norm covers every bucket.
  double expect = r1.grad().pow(2).sum().item<double>() + r2.grad().pow(2).sum().item<double>() +
                  r3.grad().pow(2).sum().item<double>();
  EXPECT_NEAR(sync.grad_norm_squared().item<double>(), expect, expect * 1e-5);
}

TEST(GradReducer, PrepareForBackwardZeroesGradientsBetweenSteps) {
  auto w = torch::ones({8}, torch::requires_grad());
  std::vector<at::Tensor> ps{w};
  GradReducer sync(ps, nullptr);
  for (int step = 0; step < 3; ++step) {
    sync.prepare_for_backward();
    EXPECT_TRUE(torch::equal(w.grad(), torch::zeros({8}))) << "step " << step;
    (w * 3).sum().backward();
    sync.finalize();
    EXPECT_TRUE(torch::allclose(w.grad(), torch::full({8}, 3.0))) << "step " << step;  // not 6 or 9
  }
}

TEST(GradReducer, ReceivedGradMarksOnlyUsedParameters) {
  auto a = torch::ones({4}, torch::requires_grad());
  auto unused = torch::ones({4}, torch::requires_grad());
  auto b = torch::ones({4}, torch::requires_grad());
  std::vector<at::Tensor> ps{a, unused, b};
  GradReducer sync(ps, nullptr);
  sync.prepare_for_backward();
  EXPECT_EQ(sync.received_grad(), (std::vector<bool>{false, false, false}));
  ((a * 2).sum() + (b * b).sum()).backward();
  sync.finalize();
  EXPECT_EQ(sync.received_grad(), (std::vector<bool>{true, false, true}));
  sync.reset_received();
  EXPECT_EQ(sync.received_grad(), (std::vector<bool>{false, false, false}));
}

// As DDP: a parameter no replica used keeps no gradient (torch.optim then skips it), and the
// bucket it sits in is still reduced, so finalize() returns.
TEST(GradReducer, UnusedParameterKeepsNoGradientAndFinalizeReturns) {
  // Two buckets; the unused parameter is alone in the first (so that bucket never gets ready).
  auto used = torch::ones({300000}, torch::requires_grad());
  auto unused = torch::ones({300000}, torch::requires_grad());
  std::vector<at::Tensor> ps{used, unused};
  GradReducer sync(ps, nullptr, small_buckets());
  ASSERT_EQ(sync.bucket_layout().size(), 2u);
  EXPECT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{1}));
  for (int step = 0; step < 2; ++step) {
    sync.prepare_for_backward();
    (used * 5).sum().backward();
    sync.finalize();
    EXPECT_GE(sync.take_comm_wait_s(), 0.0);
    EXPECT_FALSE(unused.grad().defined()) << "step " << step << ": not a zero gradient";
    EXPECT_TRUE(torch::allclose(used.grad(), torch::full({300000}, 5.0))) << "step " << step;
  }
  EXPECT_FALSE(sync.received_grad()[1]);
  EXPECT_TRUE(sync.received_grad()[0]);
}

TEST(GradReducer, WorksWithModuleParametersAcrossSteps) {
  torch::manual_seed(4);
  torch::nn::Linear lin(6, 3);
  auto params = lin->parameters();
  GradReducer sync(params, nullptr);
  auto x = torch::randn({5, 6});
  for (int step = 0; step < 2; ++step) {
    sync.prepare_for_backward();
    lin->forward(x).pow(2).sum().backward();
    sync.finalize();
    // Reference on a fresh copy without GradReducer.
    auto w = lin->weight.detach().clone().requires_grad_(true);
    auto bias = lin->bias.detach().clone().requires_grad_(true);
    torch::nn::functional::linear(x, w, bias).pow(2).sum().backward();
    EXPECT_TRUE(torch::allclose(lin->weight.grad(), w.grad(), 1e-5, 1e-6)) << "step " << step;
    EXPECT_TRUE(torch::allclose(lin->bias.grad(), bias.grad(), 1e-5, 1e-6)) << "step " << step;
  }
}

// Two Gloo ranks (threads); rank r's gradients are known constants c_r so every reduced value is
// computable by hand. Two buckets, so the local norm is summed over buckets before it rides in
// the last one.
struct TwoRankStep {
  std::vector<float> reduced_a, reduced_b;  // per rank: param a's and b's reduced gradient (first element)
  std::vector<double> local_mean, mean_sq, grad_sq;
  std::vector<bool> reduced, stop;
  int64_t payload = 0;
};

TwoRankStep two_rank_step(bool mean, bool require_sync, int stop_rank,
                          distributed::BuiltinCommHook hook = distributed::BuiltinCommHook::kAllreduce) {
  TwoRankStep out;
  out.reduced_a.resize(2);
  out.reduced_b.resize(2);
  out.local_mean.resize(2);
  out.mean_sq.resize(2);
  out.grad_sq.resize(2);
  out.reduced.resize(2);
  out.stop.resize(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    // 300000 floats each: a and b land in different buckets.
    auto a = torch::zeros({300000}, torch::requires_grad());
    auto b = torch::zeros({300000}, torch::requires_grad());
    std::vector<at::Tensor> ps{a, b};
    GradReducerOptions options = small_buckets();
    options.reduce = mean ? config::Reduce::kMean : config::Reduce::kSum;
    options.comm_hook = hook;
    GradReducer sync(ps, comm, options);
    EXPECT_EQ(sync.bucket_layout().size(), 2u);
    sync.set_require_sync(require_sync);
    sync.request_stop(r == stop_rank);
    sync.prepare_for_backward();
    // Rank 0: grad a = 1, grad b = 2; rank 1: grad a = 3, grad b = 6.
    const double k = r == 0 ? 1.0 : 3.0;
    ((a * k).sum() + (b * (2 * k)).sum()).backward();
    sync.finalize();
    out.reduced_a[r] = a.grad()[0].item<float>();
    out.reduced_b[r] = b.grad()[0].item<float>();
    out.reduced[r] = sync.local_norm_squared_mean().defined();
    out.stop[r] = sync.stop_flag().item<double>() > 0;
    if (out.reduced[r]) out.local_mean[r] = sync.local_norm_squared_mean().item<double>();
    out.mean_sq[r] =
        mean_grad_norm_squared(sync.grad_norm_squared(), options.reduce, out.reduced[r] ? 2 : 1).item<double>();
    out.grad_sq[r] = sync.grad_norm_squared().item<double>();
    if (r == 0) out.payload = sync.payload_bytes();
  });
  return out;
}

// DDP's find_unused_parameters=False case that must not hang: a bucket whose only parameter
// gets no gradient is never ready during backward (and so neither is any later bucket);
// finalize() launches them all, in order, on every rank.
TEST(GradReducer, UnusedParameterOnTwoRanksIsReducedWithoutHanging) {
  std::vector<float> used_grad(2);
  std::vector<int> unused_defined(2);  // int, not bool: written by two threads at once
  testing::run_ranks(
      2,
      [&](const std::shared_ptr<Comm>& comm) {
        auto used = torch::ones({300000}, torch::requires_grad());
        auto unused = torch::ones({300000}, torch::requires_grad());
        std::vector<at::Tensor> ps{used, unused};
        GradReducerOptions options = small_buckets();
        options.rebuild_buckets = false;
        GradReducer sync(ps, comm, options);
        ASSERT_EQ(sync.bucket_layout()[0], (std::vector<size_t>{1})) << "the unused parameter's bucket is first";
        for (int step = 0; step < 2; ++step) {
          sync.prepare_for_backward();
          (used * (comm->rank == 0 ? 1.0 : 3.0)).sum().backward();
          sync.finalize();
        }
        used_grad[comm->rank] = used.grad()[0].item<float>();
        unused_defined[comm->rank] = unused.grad().defined();
      },
      std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(used_grad[r], 2.0f) << "rank " << r << ": the mean of 1 and 3";
    EXPECT_FALSE(unused_defined[r]) << "rank " << r << ": unused on every rank, so no gradient";
  }
}

// A parameter that only rank 0 used is used globally: both ranks get the reduced gradient (rank
// 1 contributes zeros), as DDP's find_unused_parameters=True. Rank 1's flag travels in the last
// bucket's used slots.
TEST(GradReducer, ParameterUsedByOneRankOnlyGetsTheReducedGradientOnBoth) {
  std::vector<float> some(2), all(2);
  std::vector<int> some_defined(2);  // int, not bool: written by two threads at once
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    auto both = torch::ones({300000}, torch::requires_grad());
    auto only0 = torch::ones({300000}, torch::requires_grad());
    std::vector<at::Tensor> ps{both, only0};
    GradReducer sync(ps, comm, small_buckets());
    for (int step = 0; step < 2; ++step) {
      sync.prepare_for_backward();
      auto loss = (both * (r == 0 ? 1.0 : 3.0)).sum();
      if (r == 0) loss = loss + (only0 * 4.0).sum();
      loss.backward();
      sync.finalize();
    }
    all[r] = both.grad()[0].item<float>();
    some_defined[r] = only0.grad().defined();
    if (only0.grad().defined()) some[r] = only0.grad()[0].item<float>();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(all[r], 2.0f) << "rank " << r;
    ASSERT_TRUE(some_defined[r]) << "rank " << r;
    EXPECT_FLOAT_EQ(some[r], 2.0f) << "rank " << r << ": (4 + 0) / 2";
  }
}

// After the first step the buckets follow the order in which gradients arrived on rank 0
// (broadcast, so every rank agrees even when its own order differed), as DDP's rebuild.
TEST(GradReducer, BucketsAreRebuiltInRankZerosArrivalOrder) {
  std::vector<std::vector<std::vector<size_t>>> before(2), after(2);
  std::vector<float> reduced(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    // 600000 floats (2.4 MB) each: one parameter per bucket at caps of 1 and 2 MB.
    auto a = torch::zeros({600000}, torch::requires_grad());
    auto b = torch::zeros({600000}, torch::requires_grad());
    auto c = torch::zeros({600000}, torch::requires_grad());
    std::vector<at::Tensor> ps{a, b, c};
    GradReducer sync(ps, comm, small_buckets());
    auto buckets = [&] { return sync.bucket_layout(); };
    before[r] = buckets();
    // The ranks build the loss's terms in opposite orders, one statement each (the operands of
    // one overloaded + are evaluated in an unspecified order: GCC right to left, clang left to
    // right). Backward runs the most recently created node first, so the gradients arrive in the
    // reverse of the order the terms were built: rank 0's a, b, c, rank 1's c, b, a (with the
    // orders swapped, both ranks end with buckets c, b, a: the rebuild follows rank 0's order).
    auto loss = [&] {
      std::vector<at::Tensor> terms;
      for (int k = 0; k < 3; ++k) {
        const int i = r == 0 ? 2 - k : k;  // rank 0 builds c, b, a; rank 1 a, b, c
        terms.push_back((ps[i] * (3.0 - i)).sum());
      }
      return terms[0] + terms[1] + terms[2];
    };
    for (int step = 0; step < 2; ++step) {
      sync.prepare_for_backward();
      loss().backward();
      sync.finalize();
      if (step == 0) after[r] = buckets();
    }
    reduced[r] = a.grad()[0].item<float>() + 10 * b.grad()[0].item<float>() + 100 * c.grad()[0].item<float>();
  });
  using Order = std::vector<std::vector<size_t>>;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(before[r], (Order{{2}, {1}, {0}})) << "reverse registration order at first";
    EXPECT_EQ(after[r], (Order{{0}, {1}, {2}})) << "rank " << r << " takes rank 0's arrival order";
    EXPECT_FLOAT_EQ(reduced[r], 3 + 10 * 2 + 100 * 1) << "rank " << r << ": every gradient reduced after the rebuild";
  }
}

TEST(GradReducer, LocalSquaredNormsAreAveragedInTheLastBucketUnderMean) {
  auto s = two_rank_step(/*mean=*/true, /*require_sync=*/true, /*stop_rank=*/-1);
  const double n = 300000;
  // |g_0|^2 = n (1 + 4), |g_1|^2 = n (9 + 36); mean over the ranks.
  const double local_mean = (n * 5 + n * 45) / 2;
  // Mean gradient: a 2, b 4.
  const double mean_sq = n * (4 + 16);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(s.reduced[r]);
    EXPECT_FLOAT_EQ(s.reduced_a[r], 2.0f);
    EXPECT_FLOAT_EQ(s.reduced_b[r], 4.0f);
    EXPECT_NEAR(s.local_mean[r], local_mean, local_mean * 1e-6) << "rank " << r;
    EXPECT_NEAR(s.mean_sq[r], mean_sq, mean_sq * 1e-6) << "rank " << r;
    EXPECT_FALSE(s.stop[r]);
  }
  EXPECT_EQ(s.payload, (2 * 300000 + 2 + 2) * 4)
      << "gradients plus the control and noise slots and a used slot per parameter";
}

TEST(GradReducer, SumReductionGivesTheSameNormsOfTheMeanGradient) {
  auto s = two_rank_step(/*mean=*/false, /*require_sync=*/true, /*stop_rank=*/1);
  const double n = 300000;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(s.reduced_a[r], 4.0f) << "summed";
    EXPECT_NEAR(s.grad_sq[r], n * (16 + 64), n * 80 * 1e-6);
    EXPECT_NEAR(s.mean_sq[r], n * (4 + 16), n * 20 * 1e-6) << "|sum / N|^2";
    EXPECT_NEAR(s.local_mean[r], (n * 5 + n * 45) / 2, n * 25 * 1e-6);
    EXPECT_TRUE(s.stop[r]) << "rank 1's stop request reaches rank " << r;
  }
}

TEST(GradReducer, Bf16CompressionSendsHalfTheBytesAndReturnsFp32Gradients) {
  auto s =
      two_rank_step(/*mean=*/true, /*require_sync=*/true, /*stop_rank=*/0, distributed::BuiltinCommHook::kBf16Compress);
  const double n = 300000;
  const double local_mean = (n * 5 + n * 45) / 2;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(s.reduced_a[r], 2.0f) << "(1 + 3) / 2 is exact in bfloat16";
    EXPECT_FLOAT_EQ(s.reduced_b[r], 4.0f);
    // The control slots travel in fp32: 7.5e6 is exact in fp32 but not a bfloat16 number (the
    // nearest are 7,471,104 and 7,503,872), so a bf16 wire would have rounded it.
    EXPECT_EQ(s.local_mean[r], local_mean) << "rank " << r;
    EXPECT_TRUE(s.stop[r]);
  }
  EXPECT_EQ(s.payload, 2 * 300000 * 2 + (2 + 2) * 4) << "gradients in bfloat16, the control and used slots in fp32";
}

// One step of a bf16 or fp16 wire, element for element: each rank's gradient divided by N in
// fp32, cast to the wire's dtype, the two summed in that dtype (one rounding per element, in either
// order), cast back. Random gradients, so most elements round; each within the wire's rounding of
// the fp32 mean: unit roundoff u (2^-8 bf16, 2^-11 fp16) of each contribution and of the sum, plus
// half of fp16's smallest subnormal.
void expect_wire_rounds_as_the_reference(distributed::BuiltinCommHook hook, at::ScalarType wire, int significant_bits) {
  const int64_t n = 300000;
  auto gradient = [&](int rank, int param) {
    auto gen = at::detail::createCPUGenerator(100 + 10 * rank + param);
    return torch::randn({n}, gen);
  };
  std::vector<std::vector<at::Tensor>> reduced(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    auto a = torch::zeros({n}, torch::requires_grad());
    auto b = torch::zeros({n}, torch::requires_grad());
    std::vector<at::Tensor> ps{a, b};
    GradReducerOptions options = small_buckets();
    options.comm_hook = hook;
    GradReducer sync(ps, comm, options);
    EXPECT_EQ(sync.bucket_layout().size(), 2u);
    sync.prepare_for_backward();
    ((a * gradient(r, 0)).sum() + (b * gradient(r, 1)).sum()).backward();
    sync.finalize();
    reduced[r] = {a.grad().clone(), b.grad().clone()};
  });
  for (int param = 0; param < 2; ++param) {
    const auto g0 = gradient(0, param), g1 = gradient(1, param);
    const auto expect = ((g0 / 2).to(wire) + (g1 / 2).to(wire)).to(torch::kFloat32);
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(torch::equal(reduced[r][param], expect)) << "rank " << r << " param " << param;
    const auto exact = g0 / 2 + g1 / 2;
    EXPECT_FALSE(torch::equal(expect, exact)) << "the wire rounded";
    const double u = std::ldexp(1.0, -significant_bits);
    const auto bound = u * ((g0 / 2).abs() + (g1 / 2).abs() + exact.abs()) + std::ldexp(1.0, -25);
    EXPECT_TRUE(((reduced[0][param] - exact).abs() <= bound).all().item<bool>()) << "param " << param;
  }
}

TEST(GradReducer, Bf16WireRoundsEachElementAsTheReferenceDoes) {
  expect_wire_rounds_as_the_reference(distributed::BuiltinCommHook::kBf16Compress, torch::kBFloat16, 8);
}

// DDP's fp16_compress_hook (replicas.grad_dtype "fp16"): 11 significant bits.
TEST(GradReducer, Fp16WireRoundsEachElementAsTheReferenceDoes) {
  expect_wire_rounds_as_the_reference(distributed::BuiltinCommHook::kFp16Compress, torch::kHalf, 11);
}

TEST(GradReducer, Fp16CompressionSendsHalfTheBytesAndKeepsTheControlSlotsExact) {
  auto s =
      two_rank_step(/*mean=*/true, /*require_sync=*/true, /*stop_rank=*/0, distributed::BuiltinCommHook::kFp16Compress);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(s.reduced_a[r], 2.0f);
    EXPECT_FLOAT_EQ(s.reduced_b[r], 4.0f);
    EXPECT_EQ(s.local_mean[r], (300000.0 * 5 + 300000.0 * 45) / 2) << "7.5e6 overflows fp16; the slots are fp32";
    EXPECT_TRUE(s.stop[r]);
  }
  EXPECT_EQ(s.payload, 2 * 300000 * 2 + (2 + 2) * 4);
}

// DDP's no_sync(): backwards without sync accumulate, the next synced backward reduces the sum
// (gradient accumulation). Rank r's micro-batch gradients are k_r per backward, three backwards.
TEST(GradReducer, NoSyncBackwardsAccumulateAndTheNextSyncedOneReducesTheSum) {
  std::vector<float> after_local(2), reduced(2);
  std::vector<double> local_mean(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    const double k = r == 0 ? 1.0 : 3.0;
    auto a = torch::zeros({300000}, torch::requires_grad());
    auto b = torch::zeros({300000}, torch::requires_grad());
    std::vector<at::Tensor> ps{a, b};
    GradReducer sync(ps, comm, small_buckets());
    sync.set_require_sync(false);
    for (int micro = 0; micro < 2; ++micro) {
      sync.prepare_for_backward(/*accumulate=*/micro > 0);
      ((a * k).sum() + (b * (2 * k)).sum()).backward();
      sync.finalize();
    }
    after_local[r] = a.grad()[0].item<float>();
    sync.set_require_sync(true);
    sync.prepare_for_backward(/*accumulate=*/true);
    ((a * k).sum() + (b * (2 * k)).sum()).backward();
    sync.finalize();
    reduced[r] = a.grad()[0].item<float>() + 10 * b.grad()[0].item<float>();
    local_mean[r] = sync.local_norm_squared_mean().item<double>();
  });
  const double n = 300000;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(after_local[r], r == 0 ? 2.0f : 6.0f) << "rank " << r << ": two local backwards summed";
    // Sums 3 k_r and 6 k_r: a (3 + 9) / 2 = 6, b (6 + 18) / 2 = 12.
    EXPECT_FLOAT_EQ(reduced[r], 6 + 10 * 12) << "rank " << r;
    // The local norm is the accumulated gradient's: |(3, 6)|^2 n and |(9, 18)|^2 n, averaged.
    EXPECT_NEAR(local_mean[r], n * (45 + 405) / 2, n * 225 * 1e-6) << "rank " << r;
  }
}

// The first finalize() rebuilds the buckets (rank 0's arrival order). When it ends a no_sync
// micro-batch, what that micro-batch used must still count at the synced one: before, the rebuild
// forgot it, and a parameter used only by the first micro-batch lost its accumulated gradient.
TEST(GradReducer, ABucketRebuildAfterANoSyncBackwardKeepsWhatItUsed) {
  std::vector<float> a_grad(2, -1), b_grad(2, -1);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const int r = comm->rank;
    const double k = r == 0 ? 1.0 : 3.0;
    auto a = torch::zeros({4}, torch::requires_grad());
    auto b = torch::zeros({4}, torch::requires_grad());
    GradReducer sync({a, b}, comm);  // rebuild_buckets on, as the trainer's
    sync.set_require_sync(false);
    sync.prepare_for_backward();
    (a * k).sum().backward();  // the first micro-batch uses a only
    sync.finalize();
    sync.set_require_sync(true);
    sync.prepare_for_backward(/*accumulate=*/true);
    (b * (2 * k)).sum().backward();  // the last uses b only
    sync.finalize();
    a_grad[r] = a.grad().defined() ? a.grad()[0].item<float>() : NAN;
    b_grad[r] = b.grad().defined() ? b.grad()[0].item<float>() : NAN;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(a_grad[r], 2.0f) << "rank " << r << ": (1 + 3) / 2, accumulated before the rebuild";
    EXPECT_FLOAT_EQ(b_grad[r], 4.0f) << "rank " << r << ": (2 + 6) / 2";
  }
}

// The operators GradReducer adds to a step of `n` parameters of 4 floats, each used once: the
// step with it minus plain autograd's backward into gradients that exist (which accumulates in
// place, as into the buckets' views).
int64_t operators_added(int n, const std::shared_ptr<Comm>& comm) {
  auto loss_of = [](const std::vector<at::Tensor>& ps) {
    at::Tensor loss = (ps[0] * 2).sum();
    for (size_t i = 1; i < ps.size(); ++i) loss = loss + (ps[i] * 2).sum();
    return loss;
  };
  std::vector<at::Tensor> ps, plain;
  for (int i = 0; i < n; ++i) {
    ps.push_back(torch::ones({4}, torch::requires_grad()));
    plain.push_back(torch::ones({4}, torch::requires_grad()));
    plain.back().mutable_grad() = torch::zeros({4});
  }
  GradReducer sync(ps, comm);
  auto step = [&] {
    sync.prepare_for_backward();
    loss_of(ps).backward();
    sync.finalize();
  };
  step();  // the first step rebuilds the buckets in arrival order (with a process group)
  step();
  return testing::operators_dispatched(step) - testing::operators_dispatched([&] { loss_of(plain).backward(); });
}

// On a GPU every operator the host dispatches costs microseconds: a reducer that made a view per
// parameter every step would cost ResNet-20 hundreds of them. It makes its views once.
TEST(GradReducer, AStepAddsNoOperatorPerParameter) {
  EXPECT_EQ(operators_added(16, nullptr), operators_added(2, nullptr)) << "one replica";
  EXPECT_GT(operators_added(2, nullptr), 0) << "the counter counts (the buckets are zeroed)";
  testing::run_ranks(2, [](const std::shared_ptr<Comm>& comm) {
    EXPECT_EQ(operators_added(16, comm), operators_added(2, comm)) << "two ranks, rank " << comm->rank;
  });
}

TEST(GradReducer, NoSyncKeepsLocalGradientsAndAgreesNothing) {
  auto s = two_rank_step(/*mean=*/true, /*require_sync=*/false, /*stop_rank=*/0);
  EXPECT_FLOAT_EQ(s.reduced_a[0], 1.0f);
  EXPECT_FLOAT_EQ(s.reduced_a[1], 3.0f);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(s.reduced[r]);
    EXPECT_FALSE(s.stop[r]) << "a stop is agreed only through a collective";
  }
  EXPECT_NEAR(s.mean_sq[1], 300000.0 * 45, 300000.0 * 45 * 1e-6) << "the local gradient";
}

}  // namespace
}  // namespace ddplab::distributed
