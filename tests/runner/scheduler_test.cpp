// The packed sweep's scheduling (runner/scheduler.h): what a run needs, the budget, the pool
// that hands out cores and GPUs, and the longest-first order, checked by replaying a schedule.
#include "ddplab/runner/scheduler.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "test_util.h"

namespace ddplab::runner {
namespace {

// A resolved spec; "device": "cuda" in `replicas` is set on the typed spec after resolving, so
// that the CPU build (whose resolve refuses cuda) can test CUDA runs' needs.
config::ExperimentSpec spec_of(nlohmann::json replicas, int epochs = 1, int64_t train_limit = 0) {
  const bool cuda = replicas.value("device", "cpu") == "cuda";
  replicas.erase("device");
  nlohmann::json doc = {{"name", "s"},
                        {"dataset", {{"name", "fashion-mnist"}, {"train_limit", train_limit}}},
                        {"model", {{"name", "mlp"}}},
                        {"batch", {{"per_replica", 32}}},
                        {"replicas", std::move(replicas)},
                        {"epochs", epochs}};
  auto spec = config::resolve(doc, "test");
  if (cuda) spec.replicas.device = config::Device::kCuda;
  return spec;
}

TEST(RunnerScheduler, ARunNeedsCoresOnCpuAndGpusOnCuda) {
  const Needs cpu = needs_of(spec_of({{"count", 4}, {"threads", 2}}));
  EXPECT_EQ(cpu.cores, 8);
  EXPECT_EQ(cpu.gpus, 0);
  EXPECT_EQ(needs_of(spec_of({{"count", 4}, {"threads", 2}, {"mode", "simulated"}})).cores, 2)
      << "simulated replicas are one process";
  const Needs cuda = needs_of(spec_of({{"count", 4}, {"device", "cuda"}}));
  EXPECT_EQ(cuda.gpus, 4);
  EXPECT_EQ(cuda.cores, 0);
  EXPECT_EQ(needs_of(spec_of({{"count", 4}, {"device", "cuda"}, {"mode", "simulated"}})).gpus, 1);
  EXPECT_EQ(describe_needs(spec_of({{"count", 4}, {"threads", 1}})), "4 cores (replicas.count 4 x replicas.threads 1)");
  EXPECT_EQ(describe_needs(spec_of({{"count", 2}, {"device", "cuda"}})), "2 GPUs (replicas.count 2, device cuda)");
}

TEST(RunnerScheduler, ABudgetSmallerThanARunIsAnErrorNamingTheRunAndItsNeeds) {
  Budget b;
  b.cores = 2;
  const auto message =
      testing::error_of([&] { check_fits("replicas.count=4,seed=1", spec_of({{"count", 4}, {"threads", 1}}), b); });
  EXPECT_NE(message.find("run replicas.count=4,seed=1 needs 4 cores (replicas.count 4 x replicas.threads 1), more "
                         "than the budget's 2 cores (--cores"),
            std::string::npos)
      << message;
  const auto gpus = testing::error_of([&] { check_fits("r", spec_of({{"count", 2}, {"device", "cuda"}}), b); });
  EXPECT_NE(gpus.find("run r needs 2 GPUs (replicas.count 2, device cuda), more than the budget's 0 GPUs (--gpus"),
            std::string::npos)
      << gpus;
  b.cores = 4;
  check_fits("replicas.count=4,seed=1", spec_of({{"count", 4}, {"threads", 1}}), b);  // fits: no throw
}

TEST(RunnerScheduler, TheBudgetTakesTheVisibleGpus) {
  EXPECT_EQ(visible_gpus("0, 2,3", 8), (std::vector<std::string>{"0", "2", "3"})) << "CUDA_VISIBLE_DEVICES wins";
  EXPECT_EQ(visible_gpus(nullptr, 2), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(visible_gpus("", 2).empty()) << "CUDA_VISIBLE_DEVICES=\"\" hides every GPU";
  PackOptions o;
  o.jobs = 2;
  const Budget all = budget_of(o, 16, {"0", "2", "3"});
  EXPECT_EQ(all.jobs, 2);
  EXPECT_EQ(all.cores, 16) << "default: the machine's cores";
  EXPECT_EQ(all.gpus, (std::vector<std::string>{"0", "2", "3"}));
  o.gpus = 2;
  o.cores = 3;
  const Budget some = budget_of(o, 16, {"0", "2", "3"});
  EXPECT_EQ(some.gpus, (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(some.cores, 3);
  o.gpus = 4;
  EXPECT_NE(
      testing::error_of([&] { budget_of(o, 16, {"0", "2", "3"}); }).find("--gpus: 4 asked for, but 3 GPUs are visible"),
      std::string::npos);
  EXPECT_FALSE(PackOptions{}.packed());
}

TEST(RunnerScheduler, ThePoolNeverHandsOutMoreThanTheBudgetAndGpusAreDisjoint) {
  Budget b;
  b.cores = 4;
  b.gpus = {"0", "1", "2", "3"};
  Pool pool(b);
  auto a = pool.take({0, 2});
  auto c = pool.take({0, 1});
  ASSERT_TRUE(a && c);
  EXPECT_EQ(a->gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(c->gpus, (std::vector<std::string>{"2"}));
  EXPECT_FALSE(pool.take({0, 2})) << "one GPU is left";
  EXPECT_FALSE(pool.take({5, 0})) << "more cores than the budget";
  pool.give_back(*a);
  auto d = pool.take({0, 3});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->gpus, (std::vector<std::string>{"0", "1", "3"})) << "never GPU 2, which c holds";
  EXPECT_EQ(pool.running(), 2);

  Budget jobs;
  jobs.jobs = 2;
  jobs.cores = 8;
  Pool capped(jobs);
  EXPECT_TRUE(capped.take({1, 0}));
  EXPECT_TRUE(capped.take({1, 0}));
  EXPECT_FALSE(capped.take({1, 0})) << "--jobs 2: two runs at once, however many cores are free";
}

TEST(RunnerScheduler, LongestRunsComeFirstTiesByNeedsThenSweepOrder) {
  const std::vector<config::ExperimentSpec> specs = {
      spec_of({{"count", 1}, {"threads", 1}}, 1), spec_of({{"count", 1}, {"threads", 1}}, 3),
      spec_of({{"count", 2}, {"threads", 1}}, 4),  // 4 epochs over 2 cores: as long as 2 on 1
      spec_of({{"count", 1}, {"threads", 1}}, 2), spec_of({{"count", 1}, {"threads", 1}}, 2, 30000)};
  std::vector<double> estimates;
  std::vector<Needs> needs;
  for (const auto& s : specs) {
    estimates.push_back(work_estimate(s));
    needs.push_back(needs_of(s));
  }
  EXPECT_DOUBLE_EQ(estimates[1], 3.0 * 60000) << "epochs x the dataset's 60,000 training images";
  EXPECT_DOUBLE_EQ(estimates[4], 2.0 * 30000) << "train_limit counts";
  EXPECT_DOUBLE_EQ(estimates[2], estimates[3]);
  EXPECT_EQ(longest_first(estimates, needs), (std::vector<size_t>{1, 2, 3, 0, 4}));
}

// Replays list scheduling: runs start in `order` when they fit, each taking `duration[i]`.
double makespan(const std::vector<size_t>& order, const std::vector<double>& duration, const std::vector<Needs>& needs,
                const Budget& budget) {
  Pool pool(budget);
  std::vector<bool> pending(duration.size(), true);
  std::vector<std::pair<double, Allocation>> running;  // end time, what it holds
  double now = 0;
  for (;;) {
    while (auto next = start_next(order, pending, needs, pool)) {
      pending[next->first] = false;
      running.emplace_back(now + duration[next->first], next->second);
    }
    if (running.empty()) return now;
    auto first = std::min_element(running.begin(), running.end(),
                                  [](const auto& a, const auto& b) { return a.first < b.first; });
    now = first->first;
    pool.give_back(first->second);
    running.erase(first);
  }
}

TEST(RunnerScheduler, LongestFirstShortensASweepOnTwoCores) {
  // Four short runs then a long one, in sweep order: in turn on 2 cores the long one starts
  // last (6 units); longest first runs it beside the others (4 units, the least possible).
  const std::vector<double> duration = {1, 1, 1, 1, 4};
  const std::vector<Needs> needs(5, Needs{1, 0});
  Budget b;
  b.cores = 2;
  EXPECT_DOUBLE_EQ(makespan({0, 1, 2, 3, 4}, duration, needs, b), 6.0);
  EXPECT_DOUBLE_EQ(makespan(longest_first(duration, needs), duration, needs, b), 4.0);
}

TEST(RunnerScheduler, ASmallRunStartsWhileABigOneWaitsForRoom) {
  Budget b;
  b.cores = 2;
  Pool pool(b);
  ASSERT_TRUE(pool.take({1, 0}));
  const std::vector<Needs> needs = {{2, 0}, {1, 0}};
  auto next = start_next({0, 1}, {true, true}, needs, pool);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->first, 1u) << "the 2-core run waits; the 1-core one fits now";
  EXPECT_DOUBLE_EQ(busy_percent(150, 2, 100), 75.0);
  EXPECT_DOUBLE_EQ(busy_percent(1, 0, 100), 0.0);
}

}  // namespace
}  // namespace ddplab::runner
