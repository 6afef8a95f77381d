// replicas.sync: post-local SGD and EASGD with real processes over Gloo on tiny generated data
// (512 samples / global batch 64 = 8 steps per epoch).
#include <cmath>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"
#include "distributed/ranks.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

nlohmann::json two_replicas(const Workspace& ws, const std::string& name) {
  auto spec = ws.base_spec(name);
  spec["replicas"]["count"] = 2;
  return spec;
}

TEST(LocalSgd, PeriodOneEqualsAllReduceSgd) {
  // Averaging the parameters after every local step of plain SGD is averaging the gradients.
  Workspace ws;
  auto spec = two_replicas(ws, "allreduce");
  spec["optimizer"]["momentum"] = 0.0;
  auto allreduce = run_spec(ws, spec, "allreduce");
  ASSERT_EQ(allreduce.command.exit_code, 0) << allreduce.command.output;
  spec["replicas"]["sync"] = {{"local_sgd", {{"period", 1}}}};
  auto local = run_spec(ws, spec, "local");
  ASSERT_EQ(local.command.exit_code, 0) << local.command.output;
  ASSERT_EQ(local.records.size(), allreduce.records.size());
  for (size_t e = 0; e < local.records.size(); ++e) {
    const auto &a = allreduce.records[e], &l = local.records[e];
    expect_close_metrics(a, l, 1e-5, "epoch " + std::to_string(e + 1));
    EXPECT_EQ(l["replica_drift"], 0.0) << "averaged after every step";
    EXPECT_TRUE(a["replica_drift"].is_null());
    EXPECT_TRUE(l["grad_noise_scale"].is_null()) << "no gradient all-reduce, no noise scale";
    EXPECT_GT(l["comm_bytes"].get<int64_t>(), 0);
  }
  EXPECT_LE(max_relative_difference(allreduce.params, local.params), 1e-5);
}

TEST(LocalSgd, AllReduceUntilStartEpochThenReplicasDriftAndTalkLess) {
  Workspace ws;
  auto spec = two_replicas(ws, "allreduce");
  spec["model"]["dropout"] = 0.3;
  spec["epochs"] = 3;
  auto allreduce = run_spec(ws, spec, "allreduce");
  ASSERT_EQ(allreduce.command.exit_code, 0) << allreduce.command.output;
  // Period 3: epoch 2 ends after 8 local steps, not at an averaging point (the audit waits for
  // step 9, in epoch 3); epoch 3 ends after 16, neither.
  spec["replicas"]["sync"] = {{"local_sgd", {{"period", 3}, {"start_epoch", 1}}}};
  auto local = run_spec(ws, spec, "local");
  ASSERT_EQ(local.command.exit_code, 0) << local.command.output;
  ASSERT_EQ(local.records.size(), 3u);
  const auto &a1 = allreduce.records[0], &l1 = local.records[0];
  for (const char* k : {"train_loss", "test_acc", "test_loss", "grad_noise_scale", "comm_bytes"})
    EXPECT_EQ(a1[k], l1[k]) << k << ": epoch 1 is all-reduce SGD";
  EXPECT_EQ(l1["replica_drift"], 0.0);
  for (size_t e = 1; e < 3; ++e) {
    const auto& l = local.records[e];
    EXPECT_TRUE(l["grad_noise_scale"].is_null()) << "epoch " << e + 1;
    EXPECT_GT(l["replica_drift"].get<double>(), 0.0) << "epoch " << e + 1;
    // 8 local steps talk 2 or 3 times instead of 8.
    EXPECT_LT(l["comm_bytes"].get<double>(), 0.5 * allreduce.records[e]["comm_bytes"].get<double>());
    EXPECT_NE(l["train_loss"], allreduce.records[e]["train_loss"]);
  }
}

TEST(Easgd, AlphaZeroLeavesReplicasIndependent) {
  Workspace ws;
  auto spec = two_replicas(ws, "independent");
  spec["epochs"] = 3;
  spec["replicas"]["sync"] = {{"easgd", {{"period", 2}, {"alpha", 0.0}}}};
  auto r = run_spec(ws, spec, "independent");
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(r.records.size(), 3u);
  auto manifest = nlohmann::json::parse(read_file(ws.out() / "independent" / "seed=3" / "manifest.json"));
  EXPECT_EQ(manifest["status"], "done");
  double drift = 0;
  for (const auto& rec : r.records) {
    // The replicas train apart on their own shards...
    EXPECT_GT(rec["replica_drift"].get<double>(), drift) << rec.dump();
    drift = rec["replica_drift"].get<double>();
    // ...while the center (what is evaluated) never moves: the initial model every epoch.
    EXPECT_EQ(rec["test_acc"], r.records[0]["test_acc"]);
    EXPECT_EQ(rec["test_loss"], r.records[0]["test_loss"]);
    EXPECT_GT(rec["comm_bytes"].get<int64_t>(), 0);
  }
  EXPECT_LT(r.records[2]["train_loss"].get<double>(), r.records[0]["train_loss"].get<double>())
      << "each replica trains on its own";

  // With a pull toward the center the replicas stay closer and the center learns.
  spec["replicas"]["sync"] = {{"easgd", {{"period", 2}, {"alpha", 0.4}}}};
  auto elastic = run_spec(ws, spec, "elastic");
  ASSERT_EQ(elastic.command.exit_code, 0) << elastic.command.output;
  EXPECT_LT(elastic.records[2]["replica_drift"].get<double>(), drift);
  EXPECT_GT(elastic.records[2]["test_acc"].get<double>(), r.records[2]["test_acc"].get<double>());
}

// Under local SGD and EASGD the gradient norm a rank checks is its own: when one replica
// diverges every rank must stop with "diverged" at the next averaging point (before, the rank
// that saw it threw alone and its peers failed on a closed connection, which under torchrun or
// srun is what the run recorded). Two ranks in this process; rank 1's learning rate blows it up.
TEST(LocalSgd, ADivergenceOfOneReplicaIsAgreedByEveryRank) {
  Workspace ws;
  const std::vector<nlohmann::json> syncs{{{"local_sgd", {{"period", 4}}}},
                                          {{"easgd", {{"period", 4}, {"alpha", 0.25}}}}};
  for (const auto& sync : syncs) {
    auto doc = two_replicas(ws, "diverge");
    doc["epochs"] = 1;
    doc["replicas"]["timeout_s"] = 10;
    doc["replicas"]["sync"] = sync;
    const config::ExperimentSpec spec = config::resolve(doc);
    doc["optimizer"]["lr"] = 1e30;
    const config::ExperimentSpec blown = config::resolve(doc);
    const data::DatasetPair data = data::load_dataset(train::dataset_options(spec.dataset));
    rundir::RunLog::create(spec, /*overwrite=*/true);
    std::vector<std::string> outcome(2);
    testing::run_ranks(2, [&](const std::shared_ptr<distributed::Comm>& comm) {
      const int r = comm->rank;
      distributed::World world;
      world.rank = r;
      world.size = world.local_size = 2;
      world.local_rank = r;
      train::ReplicaOptions options;
      options.run_dir = rundir::run_dir(spec);
      options.progress = false;
      options.quiet = true;
      options.data = &data;
      options.comm = comm;
      try {
        train::train_replica(r == 1 ? blown : spec, world, options);
        outcome[r] = "finished";
      } catch (const train::Diverged& d) {
        outcome[r] = std::string("diverged: ") + d.what();
      } catch (const std::exception& e) {
        outcome[r] = std::string("failed: ") + e.what();
      }
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(outcome[r].rfind("diverged", 0), 0u) << sync.dump() << " rank " << r << ": " << outcome[r];
    EXPECT_NE(outcome[1].find("local (rank 1) gradient norm"), std::string::npos) << outcome[1];
  }
}

// debug.fault "stop" (as SIGTERM) under EASGD: the request waits for the next elastic step, where
// every rank agrees; before, it was only offered to the gradient all-reduce, which EASGD never runs.
TEST(Easgd, AStopRequestIsAgreedAtTheNextElasticStep) {
  Workspace ws;
  auto spec = two_replicas(ws, "stopped");
  spec["replicas"]["sync"] = {{"easgd", {{"period", 4}, {"alpha", 0.25}}}};
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 1}};
  auto r = run_spec(ws, spec, "stopped");
  EXPECT_NE(r.command.exit_code, 0) << r.command.output;
  auto manifest = nlohmann::json::parse(read_file(ws.out() / "stopped" / "seed=3" / "manifest.json"));
  EXPECT_EQ(manifest["status"], "interrupted") << r.command.output;
  EXPECT_EQ(manifest["checkpoint"]["step_in_epoch"], 4) << "stopped after the elastic step of step 3";
}

// The averaged weights that local SGD and EASGD evaluate and save would meet rank 0's BatchNorm
// statistics, gathered for rank 0's own weights: refused before any run directory is made.
TEST(LocalSgd, ABatchNormModelIsRefusedNamingTheSpecKeys) {
  Workspace ws(256, 100);
  const std::vector<nlohmann::json> syncs{{{"local_sgd", {{"period", 4}}}},
                                          {{"easgd", {{"period", 4}, {"alpha", 0.25}}}}};
  for (const auto& sync : syncs) {
    auto spec = two_replicas(ws, "bn");
    spec["model"] = {{"name", "resnet20"}};
    spec["replicas"]["sync"] = sync;
    auto r = run_spec(ws, spec, "bn");
    EXPECT_EQ(r.command.exit_code, 2) << r.command.output;
    for (const char* culprit : {"/replicas/sync", "model.name \"resnet20\"", "BatchNorm"})
      EXPECT_NE(r.command.output.find(culprit), std::string::npos) << culprit << " in " << r.command.output;
    EXPECT_FALSE(std::filesystem::exists(ws.out() / "bn")) << "refused before a run directory";
  }
}

TEST(Easgd, CenterAuditCatchesReplicasThatStartedApart) {
  // Without the initial broadcast every rank's center is its own initial model: the audit of the
  // center variable stops the run.
  Workspace ws;
  auto spec = two_replicas(ws, "apart");
  spec["replicas"]["sync"] = {{"easgd", {{"period", 2}, {"alpha", 0.25}}}};
  spec["debug"] = {{"fault", "skip_broadcast"}};
  auto r = run_spec(ws, spec, "apart");
  EXPECT_EQ(r.command.exit_code, 1) << r.command.output;
  EXPECT_NE(r.command.output.find("replica consistency audit failed after epoch 1: EASGD center variable of "
                                  "parameter 'fc1.weight'"),
            std::string::npos)
      << r.command.output;
}

}  // namespace
}  // namespace ddplab::testing
