// N replicas as real processes over c10d Gloo on 127.0.0.1, launched by ddplab itself (and by
// torchrun when the venv has it): equivalence with one big batch, reduce sum vs mean, the
// audits that catch the seed's bugs, and failure handling.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/data/idx.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

void expect_same_training(const RunOutput& a, const RunOutput& b, double tol) {
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t e = 0; e < a.records.size(); ++e) {
    double la = a.records[e]["train_loss"], lb = b.records[e]["train_loss"];
    EXPECT_LE(std::fabs(la - lb) / std::fabs(la), tol) << "epoch " << e + 1 << ": " << la << " vs " << lb;
    EXPECT_EQ(a.records[e]["step"], b.records[e]["step"]);
  }
  EXPECT_LE(max_relative_difference(a.params, b.params), tol);
}

// Runs `spec` as `name` on `count` replicas; the run must succeed.
RunOutput run_on(const Workspace& ws, nlohmann::json spec, int count, const std::string& name) {
  spec["replicas"]["count"] = count;
  auto out = run_spec(ws, spec, name);
  EXPECT_EQ(out.command.exit_code, 0) << out.command.output;
  return out;
}

TEST(Ddp, ReplicasOfSmallerBatchesEqualOneReplicaOfTheGlobalBatch) {
  Workspace ws;
  auto spec = ws.base_spec("eq");
  auto one = run_on(ws, spec, 1, "one");
  auto two = run_on(ws, spec, 2, "two");
  auto four = run_on(ws, spec, 4, "four");
  ASSERT_EQ(one.records.size(), 2u);
  EXPECT_EQ(two.records[0]["replicas"], 2);
  EXPECT_EQ(four.records[0]["global_batch"], 64);
  expect_same_training(one, two, 1e-5);
  expect_same_training(one, four, 1e-5);
  // Test metrics are summed exactly over the shards: the same model gives the same accuracy.
  EXPECT_NEAR(one.records[1]["test_acc"].get<double>(), four.records[1]["test_acc"].get<double>(), 1e-9);
}

// The test above fits its model in one bucket and its data in whole batches. Here mnist_cnn's
// gradients take two buckets (fc1.weight alone passes the first's 1 MiB), so the buckets launch
// during backward and the second waits for the first; and 500 samples make 7 global batches of
// 64 and a partial one of 52, which every replica count drops (drop_last) alike.
TEST(Ddp, MultiBucketModelWithAPartialLastBatchEqualsOneReplica) {
  Workspace ws(500, 100);
  auto spec = ws.base_spec("buckets");
  spec["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.0}};
  spec["epochs"] = 1;
  auto one = run_on(ws, spec, 1, "one");
  auto two = run_on(ws, spec, 2, "two");
  ASSERT_EQ(two.records.size(), 1u);
  EXPECT_EQ(two.records[0]["step"], 7) << "the partial batch of 52 is dropped";
  // A convolution sums over another batch split: rounding grows a little faster than the MLP's.
  expect_same_training(one, two, 1e-4);
}

TEST(Ddp, SumReductionWithLrOverNEqualsMeanReduction) {
  Workspace ws;
  auto spec = ws.base_spec("sum");
  spec["replicas"]["count"] = 2;
  spec["optimizer"]["momentum"] = 0.0;
  auto mean = run_spec(ws, spec, "mean");
  ASSERT_EQ(mean.command.exit_code, 0) << mean.command.output;
  spec["replicas"]["reduce"] = "sum";
  spec["optimizer"]["lr"] = 0.05 / 2;
  auto sum = run_spec(ws, spec, "sum");
  ASSERT_EQ(sum.command.exit_code, 0) << sum.command.output;
  expect_same_training(mean, sum, 1e-5);
}

TEST(Ddp, SumWithWeightDecayEqualsMeanOnlyAtLrOverNAndWeightDecayTimesN) {
  // SGD adds weight_decay x w to the reduced gradient: the sum of 2 replicas needs lr / 2 and
  // weight_decay x 2 to take mean's steps (docs/spec.md, replicas.reduce).
  Workspace ws;
  auto spec = ws.base_spec("sum_wd");
  spec["optimizer"]["momentum"] = 0.0;
  spec["optimizer"]["weight_decay"] = 0.01;
  auto mean = run_on(ws, spec, 2, "mean");
  spec["replicas"]["reduce"] = "sum";
  spec["optimizer"]["lr"] = 0.05 / 2;
  auto lr_only = run_on(ws, spec, 2, "sum_lr");
  spec["optimizer"]["weight_decay"] = 0.02;
  auto both = run_on(ws, spec, 2, "sum_lr_wd");
  expect_same_training(mean, both, 1e-5);
  EXPECT_GT(max_relative_difference(mean.params, lr_only.params), 1e-4)
      << "with lr / 2 alone the weight decay is halved: not mean's training";
}

TEST(Ddp, AdamIsBlindToSumVersusMeanSoSumIsNoLrChange) {
  // Adam divides by the running RMS of the gradient: twice the gradient takes the same steps (up
  // to eps), so sum at the same lr is mean's training and sum at lr / 2 is not.
  Workspace ws;
  auto spec = ws.base_spec("sum_adam");
  spec["optimizer"] = {{"name", "adam"}, {"lr", 0.001}};
  auto mean = run_on(ws, spec, 2, "mean");
  spec["replicas"]["reduce"] = "sum";
  auto sum = run_on(ws, spec, 2, "sum");
  spec["optimizer"]["lr"] = 0.0005;
  auto halved = run_on(ws, spec, 2, "sum_half_lr");
  expect_same_training(mean, sum, 1e-4);
  EXPECT_GT(max_relative_difference(mean.params, halved.params), 1e-3) << "lr / 2 under Adam halves the steps";
}

TEST(Ddp, Bf16GradientAllReduceHalvesTheBytesAndStaysCloseToFp32) {
  Workspace ws;
  auto spec = ws.base_spec("wire");
  spec["replicas"]["count"] = 2;
  auto fp32 = run_spec(ws, spec, "fp32");
  ASSERT_EQ(fp32.command.exit_code, 0) << fp32.command.output;
  spec["replicas"]["grad_dtype"] = "bf16";
  auto bf16 = run_spec(ws, spec, "bf16");
  ASSERT_EQ(bf16.command.exit_code, 0) << bf16.command.output << "\n(the replica consistency audit ran every epoch)";
  ASSERT_EQ(bf16.records.size(), 2u);
  // Half the gradient bytes; the control slots stay fp32 on both wires: 8 steps x 6 slots (stop, noise, 4 used) x 4
  // bytes (2 ranks: a ring all-reduce sends 2 (N - 1) / N = 1 x the payload).
  EXPECT_EQ(2 * bf16.records[1]["comm_bytes"].get<int64_t>() - fp32.records[1]["comm_bytes"].get<int64_t>(), 8 * 6 * 4);
  const double diff = max_relative_difference(fp32.params, bf16.params);
  EXPECT_GT(diff, 0.0) << "the gradients were rounded to bfloat16 on the wire";
  EXPECT_LT(diff, 0.05) << "16 steps of bf16-rounded gradients stay close to fp32";
  EXPECT_LT(relative_difference(fp32.records[1]["train_loss"], bf16.records[1]["train_loss"]), 0.05);
}

TEST(Ddp, Bf16AutocastTrainsCloseToFp32) {
  Workspace ws;
  auto spec = ws.base_spec("autocast");
  auto fp32 = run_spec(ws, spec, "fp32");
  ASSERT_EQ(fp32.command.exit_code, 0) << fp32.command.output;
  spec["precision"] = "bf16";
  auto bf16 = run_spec(ws, spec, "bf16");
  ASSERT_EQ(bf16.command.exit_code, 0) << bf16.command.output;
  ASSERT_EQ(bf16.records.size(), 2u);
  const double diff = max_relative_difference(fp32.params, bf16.params);
  EXPECT_GT(diff, 0.0) << "the forward ran in bfloat16";
  EXPECT_LT(diff, 0.05);
  EXPECT_LT(relative_difference(fp32.records[1]["train_loss"], bf16.records[1]["train_loss"]), 0.05);
  EXPECT_NEAR(fp32.records[1]["test_acc"].get<double>(), bf16.records[1]["test_acc"].get<double>(), 0.05);
}

TEST(Ddp, ReplicasThatDoNotShareWeightsAreCaught) {
  Workspace ws;
  auto spec = ws.base_spec("unshared");
  spec["replicas"]["count"] = 2;
  spec["debug"] = {{"fault", "skip_broadcast"}};
  auto r = run_spec(ws, spec, "unshared");
  EXPECT_EQ(r.command.exit_code, 1) << r.command.output;
  EXPECT_NE(r.command.output.find("replica consistency audit failed after epoch 1"), std::string::npos)
      << r.command.output;
  EXPECT_NE(r.command.output.find("'fc1.weight'"), std::string::npos) << r.command.output;
  EXPECT_TRUE(r.records.empty()) << "no record of an inconsistent epoch";
}

TEST(Ddp, AnUpdateOfOnlyTheFirstVariableIsCaught) {
  Workspace ws;
  auto spec = ws.base_spec("first_only");
  spec["replicas"]["count"] = 2;
  spec["debug"] = {{"fault", "update_first_only"}};
  auto r = run_spec(ws, spec, "first_only");
  EXPECT_EQ(r.command.exit_code, 1) << r.command.output;
  EXPECT_NE(r.command.output.find("update audit failed in epoch 1: parameter 'fc1.bias' did not change"),
            std::string::npos)
      << r.command.output;
  // The same bug on one replica is caught too.
  spec["replicas"]["count"] = 1;
  auto single = run_spec(ws, spec, "first_only_single");
  EXPECT_EQ(single.command.exit_code, 1) << single.command.output;
  EXPECT_NE(single.command.output.find("'fc1.bias' did not change"), std::string::npos) << single.command.output;
}

// debug.audits "warn": the same bug as above trains on to the end; every epoch's record and
// rank 0's console name the failed audit (with "abort", the default, the test above exits 1).
TEST(Ddp, WarnModeTrainsPastAFailedUpdateAuditAndRecordsIt) {
  Workspace ws;
  auto spec = ws.base_spec("first_only_warn");
  spec["replicas"]["count"] = 2;
  spec["debug"] = {{"fault", "update_first_only"}, {"audits", "warn"}};
  auto r = run_spec(ws, spec, "first_only_warn");
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(r.records.size(), 2u) << "both epochs ran";
  for (int epoch = 1; epoch <= 2; ++epoch) {
    const std::string found = fmt::format(
        "update audit failed in epoch {}: parameter 'fc1.bias' did not change although it received gradients", epoch);
    const auto& warnings = r.records[epoch - 1]["audit_warnings"];
    ASSERT_EQ(warnings.size(), 1u) << r.records[epoch - 1].dump();
    EXPECT_EQ(warnings[0].get<std::string>().find(found), 0u) << warnings[0];
    EXPECT_NE(r.command.output.find("ddplab: audit warning (debug.audits is warn, training goes on): " + found),
              std::string::npos)
        << r.command.output;
  }
}

TEST(Ddp, WarnModeTrainsOnReplicasThatDoNotShareWeights) {
  Workspace ws;
  auto spec = ws.base_spec("unshared_warn");
  spec["replicas"]["count"] = 2;
  spec["debug"] = {{"fault", "skip_broadcast"}, {"audits", "warn"}};
  auto r = run_spec(ws, spec, "unshared_warn");
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(r.records.size(), 2u);
  const auto& warnings = r.records[0]["audit_warnings"];
  ASSERT_EQ(warnings.size(), 1u) << r.records[0].dump();
  EXPECT_EQ(
      warnings[0].get<std::string>().find("replica consistency audit failed after epoch 1: parameter 'fc1.weight'"), 0u)
      << warnings[0];
  EXPECT_NE(r.command.output.find("audit warning (debug.audits is warn, training goes on): replica consistency audit "
                                  "failed after epoch 1"),
            std::string::npos)
      << r.command.output;
}

// A correct run under "warn" records no audit_warnings field at all: its records are those of "abort".
TEST(Ddp, WarnModeWithoutABugRecordsNothing) {
  Workspace ws;
  auto spec = ws.base_spec("clean_warn");
  auto abort_run = run_on(ws, spec, 2, "clean_abort");
  spec["debug"] = {{"audits", "warn"}};
  auto warn_run = run_on(ws, spec, 2, "clean_warn");
  ASSERT_EQ(warn_run.records.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_FALSE(warn_run.records[e].contains("audit_warnings")) << warn_run.records[e].dump();
    EXPECT_EQ(warn_run.records[e]["train_loss"], abort_run.records[e]["train_loss"]);
  }
  EXPECT_EQ(warn_run.command.output.find("audit warning"), std::string::npos) << warn_run.command.output;
}

// debug.fault eval_first_half evaluates the first n/2 test images: exactly what dataset.test_limit
// n/2 evaluates, and not what the whole test set gives. Training is not touched.
TEST(Ddp, EvalFirstHalfEvaluatesTheFirstHalfOfTheTestSet) {
  Workspace ws(512, 200);
  auto spec = ws.base_spec("eval_half");
  auto whole = run_on(ws, spec, 2, "eval_whole");
  spec["debug"] = {{"fault", "eval_first_half"}};
  auto half = run_on(ws, spec, 2, "eval_half");
  spec.erase("debug");
  spec["dataset"]["test_limit"] = 100;
  auto limited = run_on(ws, spec, 2, "eval_limit_100");
  ASSERT_EQ(half.records.size(), 2u);
  ASSERT_EQ(limited.records.size(), 2u);
  ASSERT_EQ(whole.records.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(half.records[e]["test_loss"], limited.records[e]["test_loss"]) << "epoch " << e + 1;
    EXPECT_EQ(half.records[e]["test_acc"], limited.records[e]["test_acc"]) << "epoch " << e + 1;
    EXPECT_NE(half.records[e]["test_loss"], whole.records[e]["test_loss"]) << "epoch " << e + 1;
    EXPECT_EQ(half.records[e]["train_loss"], whole.records[e]["train_loss"]) << "epoch " << e + 1;
  }
}

// debug.fault one_sided_sigmoid_loss replaces the training and the evaluation loss: near-uniform
// logits give -log(sigmoid(0)) = ln 2 where cross-entropy gives ln 10, and training only lowers
// it. (The unit tests in tests/train/loss_test.cpp check its values.)
TEST(Ddp, OneSidedSigmoidLossReplacesTrainingAndEvaluationLoss) {
  Workspace ws;
  auto spec = ws.base_spec("one_sided");
  auto fixed = run_on(ws, spec, 2, "cross_entropy");
  spec["debug"] = {{"fault", "one_sided_sigmoid_loss"}};
  auto bug = run_on(ws, spec, 2, "one_sided");
  ASSERT_EQ(bug.records.size(), 2u);
  ASSERT_EQ(fixed.records.size(), 2u);
  EXPECT_LT(bug.records[0]["train_loss"].get<double>(), std::log(2.0)) << bug.records[0].dump();
  EXPECT_GT(fixed.records[0]["train_loss"].get<double>(), std::log(2.0)) << fixed.records[0].dump();
  for (const auto& record : bug.records) EXPECT_LT(record["test_loss"].get<double>(), std::log(2.0)) << record.dump();
}

// The array form of debug.fault: the seed's three bugs in one run, trained to the end under "warn".
TEST(Ddp, TheSeedsBugsRunTogetherUnderWarn) {
  Workspace ws;
  auto spec = ws.base_spec("seed_bugs");
  spec["debug"] = {{"fault", {"update_first_only", "one_sided_sigmoid_loss", "eval_first_half"}}, {"audits", "warn"}};
  auto bugs = run_on(ws, spec, 2, "seed_bugs");
  ASSERT_EQ(bugs.records.size(), 2u);
  for (const auto& record : bugs.records) {
    ASSERT_EQ(record["audit_warnings"].size(), 1u) << record.dump();
    EXPECT_NE(record["audit_warnings"][0].get<std::string>().find("update audit failed"), std::string::npos);
  }
}

// A parameter that cannot learn because its gradients are exactly zero is not blamed on the
// optimizer: the audit says why it did not change.
TEST(Ddp, AParameterWithOnlyZeroGradientsIsNotBlamedOnTheOptimizer) {
  Workspace ws(128, 32);
  data::write_idx((ws.data() / "train-images-idx3-ubyte.gz").string(), {128, 28, 28},
                  std::vector<uint8_t>(128 * 28 * 28, 0), /*gzip=*/true);
  auto r = run_spec(ws, ws.base_spec("zeros"), "zeros");
  EXPECT_EQ(r.command.exit_code, 1) << r.command.output;
  EXPECT_NE(r.command.output.find("parameter 'fc1.weight' did not change: its gradients were exactly zero"),
            std::string::npos)
      << r.command.output;
  EXPECT_EQ(r.command.output.find("returns after the first variable"), std::string::npos) << r.command.output;
}

void expect_failure_is_contained(const std::string& fault) {
  Workspace ws(4096, 100);
  auto spec = ws.base_spec("fail_" + fault);
  spec["replicas"]["count"] = 2;
  spec["epochs"] = 20;
  spec["debug"] = {{"fault", fault}, {"rank", 1}, {"step", 70}};
  auto r = run_spec(ws, spec, "fail_" + fault);
  EXPECT_EQ(r.command.exit_code, 1) << r.command.output;
  EXPECT_LT(r.command.seconds, 60.0);
  EXPECT_NE(r.command.output.find("rank 1"), std::string::npos) << r.command.output;
  EXPECT_FALSE(process_with_argument_exists((ws.out() / ("fail_" + fault)).string())) << "a worker was left behind";
  auto manifest = nlohmann::json::parse(read_file(ws.out() / ("fail_" + fault) / "seed=3" / "manifest.json"));
  EXPECT_EQ(manifest["status"], "failed");
  EXPECT_NE(manifest["message"].get<std::string>().find("rank 1"), std::string::npos);
  EXPECT_EQ(read_records(ws.out() / ("fail_" + fault) / "seed=3").size(), 1u) << "epoch 1 (64 steps) was recorded";
}

TEST(Ddp, AKilledRankStopsTheRunWithoutOrphans) { expect_failure_is_contained("crash"); }

TEST(Ddp, AnExceptionOnOneRankStopsTheRunWithoutOrphans) { expect_failure_is_contained("throw"); }

TEST(Ddp, TorchrunGivesTheSameMetricsAsDdplabsLauncher) {
  std::string torchrun = std::string(DDPLAB_VENV_BIN) + "/torchrun";
  if (!fs::exists(torchrun)) GTEST_SKIP() << "no torchrun in " << DDPLAB_VENV_BIN;
  Workspace ws;
  auto spec = ws.base_spec("launchers");
  spec["replicas"]["count"] = 2;
  auto own = run_spec(ws, spec, "own");
  ASSERT_EQ(own.command.exit_code, 0) << own.command.output;
  spec["name"] = "torchrun";
  auto path = ws.write_spec(spec, "torchrun.json");
  auto r = run_command("OMP_NUM_THREADS=1 " + torchrun + " --standalone --nproc-per-node=2 --no-python " + DDPLAB_BIN +
                       " worker " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::path dir = ws.out() / "torchrun" / "seed=3";
  auto records = read_records(dir);
  ASSERT_EQ(records.size(), own.records.size());
  for (size_t e = 0; e < records.size(); ++e)
    for (const char* k : {"train_loss", "train_acc", "test_loss", "test_acc", "lr", "step"})
      EXPECT_EQ(records[e][k], own.records[e][k]) << k << " in epoch " << e + 1;
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["launcher"], "torchrun");
  EXPECT_EQ(manifest["status"], "done");
}

}  // namespace
}  // namespace ddplab::testing
