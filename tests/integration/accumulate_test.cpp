// batch.accumulate_steps: each replica's batch as K micro-batches, gradients accumulated under
// no_sync() and all-reduced once. Without dropout and BatchNorm a run must equal the same run
// without accumulation (to float rounding): the same losses, accuracies, parameters, traffic and
// noise scale. A loss not divided by K would step K times too far; a reduction at every
// micro-batch would leave the same reduced gradient (a sum of means) but a wrong local norm,
// which the noise scale shows.
#include <cmath>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

RunOutput run_ok(const Workspace& ws, const nlohmann::json& spec, const std::string& name) {
  auto out = run_spec(ws, spec, name);
  EXPECT_EQ(out.command.exit_code, 0) << out.command.output;
  return out;
}

nlohmann::json accumulating(nlohmann::json spec, int steps) {
  spec["batch"]["accumulate_steps"] = steps;
  return spec;
}

void expect_same_training(const RunOutput& a, const RunOutput& b, double tol) {
  ASSERT_FALSE(a.records.empty());
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t e = 0; e < a.records.size(); ++e) {
    const auto &ra = a.records[e], &rb = b.records[e];
    const std::string where = "epoch " + std::to_string(e + 1);
    expect_close_metrics(ra, rb, tol, where);
    EXPECT_LE(relative_difference(ra["train_acc"], rb["train_acc"]), tol) << where;
    EXPECT_LE(relative_difference(ra["grad_norm"], rb["grad_norm"]), tol) << where;
    for (const char* k : {"step", "lr", "global_batch", "replicas", "comm_bytes"}) EXPECT_EQ(ra[k], rb[k]) << k;
  }
  EXPECT_LE(max_relative_difference(a.params, b.params), tol);
}

// The noise scale's local norm must be of each replica's whole accumulated gradient (B/N samples).
void expect_same_noise_scale(const RunOutput& a, const RunOutput& b) {
  for (size_t e = 0; e < a.records.size() && e < b.records.size(); ++e) {
    ASSERT_TRUE(a.records[e]["gns_trace_ema"].is_number()) << a.records[e].dump();
    ASSERT_TRUE(b.records[e]["gns_trace_ema"].is_number()) << b.records[e].dump();
    for (const char* k : {"gns_trace_ema", "gns_grad_sq_ema"})
      EXPECT_LE(relative_difference(a.records[e][k], b.records[e][k]), 1e-3) << k << " in epoch " << e + 1;
  }
}

TEST(Accumulate, OneReplicaOfFourMicroBatchesEqualsTheWholeBatchAndTheDefaultIsOne) {
  Workspace ws;
  const auto spec = ws.base_spec("one");  // global batch 64, mlp, dropout 0, 2 epochs of 8 steps
  auto whole = run_ok(ws, spec, "whole");
  auto two = run_ok(ws, accumulating(spec, 2), "two");
  auto four = run_ok(ws, accumulating(spec, 4), "four");
  ASSERT_EQ(whole.records.size(), 2u);
  EXPECT_EQ(four.records[1]["step"], 16) << "one optimizer step per global batch";
  expect_same_training(whole, two, 1e-5);
  expect_same_training(whole, four, 1e-5);
  // The default fills the one new field into spec.json.
  const auto resolved = nlohmann::json::parse(read_file(ws.out() / "whole" / "seed=3" / "spec.json"));
  EXPECT_EQ(resolved["batch"], nlohmann::json({{"global", 64}, {"accumulate_steps", 1}}));
}

// mnist_cnn's gradients take two buckets, so the first is launched during the last micro-batch's
// backward: it must carry that replica's accumulated sum.
TEST(Accumulate, TwoProcessesOfTwoMicroBatchesEqualTwoProcessesWithout) {
  Workspace ws(256, 100);
  auto spec = ws.base_spec("procs");
  spec["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.0}};
  spec["epochs"] = 1;
  spec["replicas"]["count"] = 2;
  auto whole = run_ok(ws, spec, "whole");
  auto two = run_ok(ws, accumulating(spec, 2), "two");
  ASSERT_EQ(two.records.size(), 1u);
  EXPECT_GT(two.records[0]["comm_bytes"].get<double>(), 0);
  // Convolutions sum over another split of the batch: rounding grows a little faster than the MLP's.
  expect_same_training(whole, two, 1e-4);
  expect_same_noise_scale(whole, two);
}

TEST(Accumulate, TwoSimulatedReplicasOfFourMicroBatchesEqualTwoProcessesWithout) {
  Workspace ws;
  auto spec = ws.base_spec("sim");
  spec["replicas"]["count"] = 2;
  auto procs = run_ok(ws, spec, "procs");
  spec["replicas"]["mode"] = "simulated";
  auto sim = run_ok(ws, accumulating(spec, 4), "sim");  // per replica 32: micro-batches of 8
  expect_same_training(procs, sim, 1e-5);
  expect_same_noise_scale(procs, sim);
}

// Two replicas under a replicas.sync that takes local steps, with and without 2 micro-batches:
// the same training, and the replicas drifted apart by the end of epoch 2 (not an averaging point).
std::pair<RunOutput, RunOutput> expect_local_steps_accumulate(const nlohmann::json& sync) {
  Workspace ws;
  auto spec = ws.base_spec("local");
  spec["replicas"]["count"] = 2;
  spec["replicas"]["sync"] = sync;
  auto whole = run_ok(ws, spec, "whole");
  auto two = run_ok(ws, accumulating(spec, 2), "two");
  expect_same_training(whole, two, 1e-5);
  EXPECT_EQ(two.records.size(), 2u);
  for (const auto* run : {&whole, &two}) {
    if (run->records.size() == 2) {
      EXPECT_GT(run->records[1]["replica_drift"].get<double>(), 0.0);
    }
  }
  return {std::move(whole), std::move(two)};
}

// Local SGD's local steps keep every micro-batch local; its all-reduced steps reduce once.
TEST(Accumulate, LocalSgdStepsAccumulateLocallyAndAllReducedStepsReduceOnce) {
  const auto [whole, two] = expect_local_steps_accumulate({{"local_sgd", {{"period", 3}, {"start_epoch", 1}}}});
  ASSERT_EQ(two.records.size(), 2u);
  EXPECT_TRUE(two.records[1]["grad_noise_scale"].is_null()) << "no gradient all-reduce in epoch 2";
}

// EASGD's local steps keep every micro-batch local; its elastic averaging is untouched.
TEST(Accumulate, EasgdStepsAccumulateLocally) {
  expect_local_steps_accumulate({{"easgd", {{"alpha", 0.2}, {"period", 3}}}});
}

// With dropout, simulated replicas must draw what each process draws, micro-batch by micro-batch.
// On CPU LibTorch's generator fills masks element by element in order, so the K micro-batches'
// masks are the numbers the whole batch would have drawn, and the run equals the unaccumulated
// one; the Simulated.DropoutStreams* control shows that another stream would not.
TEST(Accumulate, SimulatedReplicasDrawTheDropoutMasksOfProcessesPerMicroBatch) {
  Workspace ws;
  auto spec = ws.base_spec("dropout");
  spec["model"]["dropout"] = 0.5;
  spec["replicas"]["count"] = 2;
  auto whole = run_ok(ws, spec, "whole");
  auto procs = run_ok(ws, accumulating(spec, 2), "procs");
  spec["replicas"]["mode"] = "simulated";
  auto sim = run_ok(ws, accumulating(spec, 2), "sim");
  expect_same_training(procs, sim, 1e-5);
  expect_same_noise_scale(procs, sim);
  expect_same_training(whole, procs, 1e-5);
}

// With BatchNorm each micro-batch is normalized over its own B/(N K) samples and the running
// statistics take K updates per step, in two processes and in one simulating process alike.
TEST(Accumulate, SimulatedReplicasNormalizeEachMicroBatchAsProcessesDo) {
  Workspace ws(256, 100);
  auto spec = ws.base_spec("bn");
  spec["model"] = {{"name", "resnet20"}};
  spec["epochs"] = 1;
  spec["replicas"]["count"] = 2;
  auto whole = run_ok(ws, spec, "whole");
  auto procs = run_ok(ws, accumulating(spec, 2), "procs");
  spec["replicas"]["mode"] = "simulated";
  auto sim = run_ok(ws, accumulating(spec, 2), "sim");
  ASSERT_EQ(procs.records.size(), 1u);
  ASSERT_EQ(sim.records.size(), 1u);
  // The test metrics go through the running statistics, so they check the buffers too.
  expect_close_metrics(procs.records[0], sim.records[0], 1e-4, "epoch 1");
  EXPECT_LE(max_relative_difference(procs.params, sim.params), 1e-4);
  EXPECT_GT(max_relative_difference(whole.params, procs.params), 1e-3) << "micro-batches of 16 are normalized alone";
}

TEST(Accumulate, AStepCountThatDoesNotDivideThePerReplicaBatchIsASpecError) {
  Workspace ws;
  auto spec = ws.base_spec("bad");
  spec["replicas"]["count"] = 2;  // per replica 32
  spec["batch"]["accumulate_steps"] = 3;
  auto result = run_ddplab("validate " + ws.write_spec(spec, "bad.json"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("/batch/accumulate_steps: must divide the per-replica batch (32) into equal "
                               "micro-batches, got 3"),
            std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace ddplab::testing
