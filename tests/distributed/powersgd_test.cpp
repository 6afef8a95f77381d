// PowerSGD (comm_hook.h, powersgd_hook()) against PyTorch's own powerSGD_hook, its state across a
// stop, and inside GradReducer. powersgd_reference.py (beside this file) records what torch's hook
// did under DDP on two gloo ranks; ddplab's hook is then given the same buckets, divided by N as
// GradReducer gives them, on two gloo ranks of its own, and must leave what torch's left.
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include "ddplab/distributed/comm_hook.h"
#include "ddplab/distributed/grad_reducer.h"
#include "distributed/ranks.h"
#include "models/own_models.h"
#include "test_util.h"

namespace ddplab::distributed {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<at::Tensor> load_tensors(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : torch::pickle_load(bytes).toList().vec()) tensors.push_back(v.toTensor());
  return tensors;
}

// One bucket as GradReducer hands it to a hook: gradients, then in the last bucket 3 control slots.
struct FakeBucket {
  at::Tensor flat;
  std::vector<at::Tensor> views;
  int64_t numel = 0;
  bool last = false;

  FakeBucket(const std::vector<std::vector<int64_t>>& shapes, bool is_last) : last(is_last) {
    for (const auto& s : shapes) numel += c10::multiply_integers(s);
    flat = torch::zeros({numel + (last ? 3 : 0)});
    int64_t at = 0;
    for (const auto& s : shapes) {
      const int64_t n = c10::multiply_integers(s);
      views.push_back(flat.narrow(0, at, n).view(s));
      at += n;
    }
  }
  at::Tensor grads() const { return flat.narrow(0, 0, numel); }
  BucketView view(int index) const {
    return BucketView{index, flat, grads(), last ? flat.narrow(0, numel, 3) : at::Tensor(), views};
  }
};

PowerSgdOptions options_of(const json& config) {
  PowerSgdOptions o;
  o.rank = config["rank"].get<int64_t>();
  o.start_iter = config["start_iter"].get<int64_t>();
  o.error_feedback = config["error_feedback"].get<bool>();
  o.warm_start = config["warm_start"].get<bool>();
  o.seed = config["seed"].get<uint32_t>();
  return o;
}

struct Replayed {
  double max_diff = 0;        // max |ddplab - torch| over every reduced gradient
  double max_value = 0;       // max |torch|
  double min_compressed = 1;  // over compressed steps: the least of a step's max |torch - plain mean|
  double max_plain = 0;       // over steps before start_iter: max |torch - plain mean|
  int compressed_steps = 0;
  bool control_exact = true;
};

// Replays one configuration's recorded buckets through ddplab's hook on `comm`'s rank, step by step
// as GradReducer runs them: every bucket launched, all waited for, every bucket finished.
// `tensors[r]` is rank r's [input, output, ...]; a layout that changes (DDP's rebuild) resets the hook.
Replayed replay(Comm& comm, const json& config, const json& shapes,
                const std::vector<std::vector<at::Tensor>>& tensors) {
  const int r = comm.rank;
  const json& records = config["records"];
  auto hook = powersgd_hook(options_of(config));
  std::map<int, std::pair<json, std::unique_ptr<FakeBucket>>> buckets;  // index -> parameters, bucket
  Replayed out;
  int step = 0;
  for (size_t first = 0; first < records.size(); ++step) {
    size_t end = first;
    while (!records[end]["last"].get<bool>()) ++end;
    ++end;
    bool rebuilt = false;
    for (size_t k = first; k < end; ++k) {
      auto& [params, bucket] = buckets[records[k]["index"].get<int>()];
      if (params == records[k]["params"]) continue;
      std::vector<std::vector<int64_t>> bucket_shapes;
      for (const auto& p : records[k]["params"])
        bucket_shapes.push_back(shapes[p.get<size_t>()].get<std::vector<int64_t>>());
      params = records[k]["params"];
      bucket = std::make_unique<FakeBucket>(bucket_shapes, records[k]["last"].get<bool>());
      rebuilt = true;
    }
    if (rebuilt) hook->reset();
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t k = first; k < end; ++k) {
      const FakeBucket& b = *buckets[records[k]["index"].get<int>()].second;
      b.grads().copy_(tensors[r][2 * k] / comm.size);
      if (b.last) b.flat.narrow(0, b.numel, 3).copy_(torch::tensor({1.0f, 2.0f, 4.0f}) * (r + 1));
      for (auto& w : hook->launch(comm, b.view(records[k]["index"].get<int>()))) works.push_back(w);
    }
    for (auto& w : works) w->wait();
    const bool compressed = step >= config["start_iter"].get<int>();
    out.compressed_steps += compressed;
    double from_plain = 0;
    for (size_t k = first; k < end; ++k) {
      const FakeBucket& b = *buckets[records[k]["index"].get<int>()].second;
      hook->finish(comm, b.view(records[k]["index"].get<int>()));
      const at::Tensor& torch_out = tensors[r][2 * k + 1];
      out.max_diff = std::max(out.max_diff, (b.grads() - torch_out).abs().max().item<double>());
      out.max_value = std::max(out.max_value, torch_out.abs().max().item<double>());
      const auto plain = (tensors[0][2 * k] + tensors[1][2 * k]) / 2;
      from_plain = std::max(from_plain, (torch_out - plain).abs().max().item<double>());
      if (b.last) out.control_exact &= torch::equal(b.flat.narrow(0, b.numel, 3), torch::tensor({3.0f, 6.0f, 12.0f}));
    }
    if (compressed) out.min_compressed = std::min(out.min_compressed, from_plain);
    if (!compressed) out.max_plain = std::max(out.max_plain, from_plain);
    first = end;
  }
  return out;
}

TEST(PowerSgd, LeavesWhatTorchsPowerSgdHookLeavesOnTheSameGradients) {
  const std::string python = testing::venv_python();
  if (python.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  testing::TempDir dir;
  const auto ran = testing::run_command(
      fmt::format("{} {}/tests/distributed/powersgd_reference.py {} 2>&1", python, DDPLAB_SOURCE_DIR, dir.str()));
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const json meta = json::parse(testing::read_file(dir.path() / "meta.json"));
  std::cout << "torch's PowerSGDState seeds from: " << meta["seeds"].get<std::string>() << "\n";
  for (const json& config : meta["configs"]) {
    const std::string name = config["name"];
    SCOPED_TRACE(name);
    std::vector<std::vector<at::Tensor>> tensors;
    for (int r = 0; r < 2; ++r) tensors.push_back(load_tensors(dir.path() / fmt::format("{}_rank{}.pt", name, r)));
    std::vector<Replayed> replayed(2);
    testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
      replayed[static_cast<size_t>(comm->rank)] = replay(*comm, config, meta["shapes"], tensors);
    });
    for (const Replayed& r : replayed) {
      std::cout << name << ": max |ddplab - torch| = " << r.max_diff << " (max |torch| " << r.max_value << ", "
                << r.compressed_steps << " compressed steps)\n";
      EXPECT_LE(r.max_diff, 1e-6 * r.max_value) << "ddplab's PowerSGD left other values than torch's";
      EXPECT_GE(r.compressed_steps, 3);
      EXPECT_GT(r.min_compressed, 1e-4 * r.max_value) << "every compressed step differs from the plain mean";
      EXPECT_LE(r.max_plain, 1e-6 * r.max_value) << "before start_iter the buckets are all-reduced as they are";
      EXPECT_TRUE(r.control_exact) << "the control slots come back summed exactly";
    }
  }
}

// Two buckets of matrices, biases and a small matrix sent as it is; rank r's gradients at `step`.
const std::vector<std::vector<std::vector<int64_t>>> kShapes = {{{48, 20}, {48}, {3, 4}, {20, 48}},
                                                                {{16, 3, 3, 3}, {16}}};

void fill(const std::vector<std::unique_ptr<FakeBucket>>& buckets, int rank, int step) {
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(100 * step + rank));
  for (const auto& b : buckets) b->grads().copy_(torch::randn({b->numel}, gen));
}

std::vector<std::unique_ptr<FakeBucket>> make_buckets() {
  std::vector<std::unique_ptr<FakeBucket>> buckets;
  for (size_t b = 0; b < kShapes.size(); ++b)
    buckets.push_back(std::make_unique<FakeBucket>(kShapes[b], b + 1 == kShapes.size()));
  return buckets;
}

// Steps [from, to) of `hook` on fresh gradients; returns each step's reduced gradients.
std::vector<at::Tensor> run_steps(Comm& comm, CommHook& hook, const std::vector<std::unique_ptr<FakeBucket>>& buckets,
                                  int from, int to) {
  std::vector<at::Tensor> reduced;
  for (int step = from; step < to; ++step) {
    fill(buckets, comm.rank, step);
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t b = 0; b < buckets.size(); ++b)
      for (auto& w : hook.launch(comm, buckets[b]->view(static_cast<int>(b)))) works.push_back(w);
    for (auto& w : works) w->wait();
    for (size_t b = 0; b < buckets.size(); ++b) hook.finish(comm, buckets[b]->view(static_cast<int>(b)));
    std::vector<at::Tensor> grads;
    for (const auto& b : buckets) grads.push_back(b->grads().clone());
    reduced.push_back(torch::cat(grads));
  }
  return reduced;
}

// A hook saved after step 4 and loaded into a new one (new buckets, as a resumed process has)
// continues with the values of the hook that never stopped: error feedback, warm-start Qs, the
// iteration and, without warm start, the stream of seeds for new Qs all came back. A new hook
// without the state does not.
void expect_saved_state_continues(bool warm_start) {
  PowerSgdOptions o;
  o.rank = 2;
  o.start_iter = 2;
  o.warm_start = warm_start;
  std::vector<std::vector<at::Tensor>> whole(2), resumed(2), fresh(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const auto r = static_cast<size_t>(comm->rank);
    auto hook = powersgd_hook(o);
    whole[r] = run_steps(*comm, *hook, make_buckets(), 0, 7);
    auto first = powersgd_hook(o);
    run_steps(*comm, *first, make_buckets(), 0, 4);
    const at::Tensor state = first->save_state();
    ASSERT_TRUE(state.defined());
    auto second = powersgd_hook(o);
    second->load_state(state.clone());
    resumed[r] = run_steps(*comm, *second, make_buckets(), 4, 7);
    auto third = powersgd_hook(o);
    fresh[r] = run_steps(*comm, *third, make_buckets(), 4, 7);
  });
  for (size_t r = 0; r < 2; ++r)
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_TRUE(torch::equal(resumed[r][s], whole[r][4 + s])) << "rank " << r << " step " << 4 + s;
      EXPECT_FALSE(torch::equal(fresh[r][s], whole[r][4 + s])) << "a hook without the state starts over";
    }
}

TEST(PowerSgd, SavedStateContinuesAsTheUninterruptedHook) {
  expect_saved_state_continues(/*warm_start=*/true);
  expect_saved_state_continues(/*warm_start=*/false);
  EXPECT_FALSE(allreduce_hook()->save_state().defined()) << "a stateless hook saves nothing";
}

// Inside GradReducer on two ranks: all-reduced as it is before start_iter, then P and Q plus the
// gradients sent as they are (bias, a 3 x 4 weight) and the control slots, which stay exact (rank
// 1's stop reaches rank 0).
TEST(PowerSgd, GradReducerSendsTheFactorsAndTheRestAndKeepsTheControlSlots) {
  std::vector<std::vector<int64_t>> payload(2);
  std::vector<int> stop(2);
  std::vector<at::Tensor> reduced(2);
  testing::run_ranks(2, [&](const std::shared_ptr<Comm>& comm) {
    const auto r = static_cast<size_t>(comm->rank);
    auto w = torch::zeros({64, 32}, torch::requires_grad());
    auto b = torch::zeros({32}, torch::requires_grad());
    auto small = torch::zeros({3, 4}, torch::requires_grad());
    GradReducerOptions options;
    options.comm_hook = distributed::BuiltinCommHook::kPowerSgd;
    options.powersgd.start_iter = 2;
    GradReducer reducer({w, b, small}, comm, options);
    auto gen = at::detail::createCPUGenerator(7 + r);
    const auto u = torch::randn({64, 1}, gen), v = torch::randn({1, 32}, gen);
    for (int step = 0; step < 4; ++step) {
      reducer.request_stop(step == 3 && r == 1);
      reducer.prepare_for_backward();
      ((w * (u.mm(v) + 0.01 * torch::randn({64, 32}, gen))).sum() + b.sum() + small.sum()).backward();
      reducer.finalize();
      payload[r].push_back(reducer.payload_bytes());
    }
    stop[r] = reducer.stop_flag().item<double>() > 0;
    reduced[r] = w.grad().clone();
  });
  const int64_t control = 2 + 3;  // stop, local norm, a used flag per parameter
  const int64_t plain = (64 * 32 + 32 + 12 + control) * 4;
  const int64_t compressed = (64 + 32 + 32 + 12 + control) * 4;  // P, Q, bias, 3 x 4, control
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(payload[r], (std::vector<int64_t>{plain, plain, compressed, compressed})) << "rank " << r;
    EXPECT_EQ(stop[r], 1) << "rank 1's stop reached rank " << r;
  }
  EXPECT_TRUE(torch::equal(reduced[0], reduced[1])) << "every rank steps on the same gradient";
}

}  // namespace
}  // namespace ddplab::distributed
