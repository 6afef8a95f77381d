// Checkpoints, resume, restarts, clean stops and divergence, with real processes: a run that is
// killed, restarted or stopped and then continued gives the same records as one that never stopped.
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/models/models.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

// 4096 samples / global batch 64 = 64 steps per epoch; dropout on, so RNG state must be restored.
// Step records every 10 steps: 7 per epoch (the last one of 4 steps).
nlohmann::json reliability_spec(const Workspace& ws, const std::string& name, int replicas) {
  auto spec = ws.base_spec(name);
  spec["model"]["dropout"] = 0.3;
  spec["replicas"]["count"] = replicas;
  spec["epochs"] = 3;
  spec["log"]["every_steps"] = 10;
  return spec;
}

std::vector<nlohmann::json> read_steps(const fs::path& dir) {
  std::vector<nlohmann::json> records;
  std::istringstream in(read_file(dir / "steps.jsonl"));
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

// Every step of `total` in exactly one record: steps increase by each record's interval_steps,
// and the epochs' records add up to their epoch records' training loss.
void expect_each_step_once(const std::vector<nlohmann::json>& steps, const std::vector<nlohmann::json>& epochs,
                           int64_t total) {
  int64_t last = 0;
  std::vector<double> loss_sum(epochs.size(), 0.0);
  for (const auto& r : steps) {
    EXPECT_EQ(r["step"].get<int64_t>(), last + r["interval_steps"].get<int64_t>()) << r.dump();
    last = r["step"].get<int64_t>();
    const size_t epoch = static_cast<size_t>((last - 1) / 64);
    ASSERT_LT(epoch, epochs.size()) << r.dump();
    loss_sum[epoch] += r["train_loss"].get<double>() * r["interval_steps"].get<double>() / 64;
  }
  EXPECT_EQ(last, total);
  for (size_t e = 0; e < epochs.size(); ++e)
    EXPECT_NEAR(loss_sum[e], epochs[e]["train_loss"].get<double>(), 1e-9) << "epoch " << e + 1;
}

void expect_same_steps(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* k : {"step", "epoch", "interval_steps", "lr", "train_loss", "train_acc", "samples"})
      EXPECT_EQ(a[i][k], b[i][k]) << k << " in step record " << i;
}

void expect_same_metrics(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e)
    for (const char* k : {"step", "lr", "train_loss", "train_acc", "test_loss", "test_acc", "grad_norm"})
      EXPECT_EQ(a[e][k], b[e][k]) << k << " in epoch " << e + 1;
}

fs::path run_dir(const Workspace& ws, const std::string& name) { return ws.out() / name / "seed=3"; }

nlohmann::json manifest(const Workspace& ws, const std::string& name) {
  return nlohmann::json::parse(read_file(run_dir(ws, name) / "manifest.json"));
}

// Runs `spec` as `name`, stopped by debug fault `stop` on `rank` at `step`, then the same command
// again, which must finish the run.
void stop_then_resume(const Workspace& ws, nlohmann::json spec, const std::string& name, int rank, int step) {
  spec["name"] = name;
  spec["debug"] = {{"fault", "stop"}, {"rank", rank}, {"step", step}};
  const std::string path = ws.write_spec(spec, name + ".json");
  auto first = run_ddplab("run " + path);
  EXPECT_EQ(manifest(ws, name)["status"], "interrupted") << first.output;
  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
}

TEST(Reliability, AKilledRunResumesFromItsCheckpointWithIdenticalRecords) {
  Workspace ws(4096, 200);
  auto full = run_ddplab("run " + ws.write_spec(reliability_spec(ws, "full", 2), "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;

  auto spec = reliability_spec(ws, "killed", 2);
  spec["debug"] = {{"fault", "crash"}, {"rank", 1}, {"step", 100}};  // SIGKILL in epoch 2
  auto path = ws.write_spec(spec, "killed.json");
  auto first = run_ddplab("run " + path);
  ASSERT_EQ(first.exit_code, 1) << first.output;
  EXPECT_EQ(manifest(ws, "killed")["status"], "failed");
  EXPECT_EQ(read_records(run_dir(ws, "killed")).size(), 1u);
  EXPECT_TRUE(fs::exists(run_dir(ws, "killed") / "checkpoint.pt"));

  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resuming"), std::string::npos) << again.output;
  auto m = manifest(ws, "killed");
  EXPECT_EQ(m["status"], "done");
  ASSERT_EQ(m["restarts"].size(), 1u);
  EXPECT_EQ(m["restarts"][0]["from_epochs_done"], 1);
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "killed")));
  // The full run's step records: at steps 10, 20, ..., 60, 64 of each epoch, over both replicas.
  const auto full_steps = read_steps(run_dir(ws, "full"));
  std::vector<int64_t> at;
  for (const auto& r : full_steps) at.push_back(r["step"].get<int64_t>());
  EXPECT_EQ(at, (std::vector<int64_t>{10,  20,  30,  40,  50,  60,  64,  74,  84,  94, 104,
                                      114, 124, 128, 138, 148, 158, 168, 178, 188, 192}));
  EXPECT_EQ(full_steps.back()["samples"], 192 * 64);
  expect_each_step_once(full_steps, read_records(run_dir(ws, "full")), 192);
  expect_same_steps(full_steps, read_steps(run_dir(ws, "killed")));
}

TEST(Reliability, MaxRestartsRestartsAllRanksFromTheCheckpoint) {
  Workspace ws(4096, 200);
  auto full = run_ddplab("run " + ws.write_spec(reliability_spec(ws, "full", 2), "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  auto spec = reliability_spec(ws, "restarted", 2);
  spec["replicas"]["max_restarts"] = 1;
  spec["debug"] = {{"fault", "crash"}, {"rank", 1}, {"step", 100}};
  auto r = run_ddplab("run " + ws.write_spec(spec, "restarted.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1"), std::string::npos) << r.output;
  auto m = manifest(ws, "restarted");
  EXPECT_EQ(m["status"], "done");
  EXPECT_EQ(m["restarts"].size(), 1u);
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "restarted")));
}

// SIGTERM once epoch 2 is under way; the run stops cleanly mid-epoch and a second `run` continues it.
void stop_and_resume(int replicas) {
  Workspace ws(4096, 200);
  auto spec = reliability_spec(ws, "full", replicas);
  spec["epochs"] = 12;
  auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  spec["name"] = "stopped";
  auto path = ws.write_spec(spec, "stopped.json");
  auto records = (run_dir(ws, "stopped") / "epochs.jsonl").string();
  std::string script = std::string(DDPLAB_BIN) + " run " + path + " & P=$!\nn=0\nwhile [ \"$(cat '" + records +
                       "' 2>/dev/null | wc -l)\" -lt 1 ] && [ $n -lt 600 ]; do sleep 0.02; n=$((n+1)); done\n"
                       "sleep 0.05\nkill -TERM $P\nwait $P\necho exit=$?\n";
  write_file(ws.dir().path() / "stop.sh", script);
  auto stopped = run_command("sh " + ws.dir().str("stop.sh"));
  ASSERT_NE(stopped.output.find("exit=143"), std::string::npos) << stopped.output;
  auto m = manifest(ws, "stopped");
  EXPECT_EQ(m["status"], "interrupted");
  EXPECT_GT(m["checkpoint"]["global_step"].get<int>(), 64) << "stopped after epoch 1";
  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "stopped")));
  // The stop closed an interval of its own; the resumed run goes on from there.
  expect_each_step_once(read_steps(run_dir(ws, "stopped")), read_records(run_dir(ws, "stopped")), 12 * 64);
}

// A stop agreed in the last step of an epoch (the flag is read one step late: asked in step 126,
// taken after step 127, the last of epoch 2): the checkpoint holds all of that epoch's steps and
// no record of it; the resumed run records the epoch without a step to run (no audit of nothing,
// the last step's lr) and goes on exactly. The stop comes from rank 1 of 2 through the all-reduce.
TEST(Reliability, AStopInTheLastStepOfAnEpochResumesExactly) {
  Workspace ws(4096, 200);
  auto full = run_ddplab("run " + ws.write_spec(reliability_spec(ws, "full", 2), "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  auto spec = reliability_spec(ws, "stopped", 2);
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 126}};
  auto path = ws.write_spec(spec, "stopped.json");
  // Started with --force, which the command that resumes must leave out: it would start over.
  auto first = run_ddplab("run " + path + " --force");
  EXPECT_NE(first.exit_code, 0) << first.output;
  auto m = manifest(ws, "stopped");
  EXPECT_EQ(m["status"], "interrupted") << first.output;
  EXPECT_EQ(m["checkpoint"]["epochs_done"], 1);
  EXPECT_EQ(m["checkpoint"]["step_in_epoch"], 64) << "every step of epoch 2";
  EXPECT_NE(first.output.find(fmt::format("the checkpoint at step 128 (epoch 2, step 64 of it) is in {}; `{} run {}` "
                                          "resumes it",
                                          run_dir(ws, "stopped").string(), DDPLAB_BIN, path)),
            std::string::npos)
      << "a stop says what it kept and the command that resumes: " << first.output;
  EXPECT_EQ(read_records(run_dir(ws, "stopped")).size(), 1u);
  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "stopped")));
  expect_same_steps(read_steps(run_dir(ws, "full")), read_steps(run_dir(ws, "stopped")));
}

// model.ema_decay: the test metrics are the average's (they differ from the same run without it),
// and a run stopped mid-epoch continues the average exactly from its checkpoint.
TEST(Reliability, AWeightEmaIsEvaluatedAndResumesExactly) {
  Workspace ws(4096, 200);
  auto plain = run_ddplab("run " + ws.write_spec(reliability_spec(ws, "plain", 2), "plain.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto spec = reliability_spec(ws, "full", 2);
  spec["model"]["ema_decay"] = 0.9;
  auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto plain_records = read_records(run_dir(ws, "plain"));
  const auto full_records = read_records(run_dir(ws, "full"));
  ASSERT_EQ(plain_records.size(), full_records.size());
  EXPECT_EQ(plain_records[0]["train_loss"], full_records[0]["train_loss"]) << "the EMA does not change training";
  const auto model = spec["model"];
  EXPECT_NE(read_final_params(run_dir(ws, "plain"), model), read_final_params(run_dir(ws, "full"), model))
      << "model.pt holds the average, not the last step's parameters";
  spec["name"] = "stopped";
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 90}};
  auto path = ws.write_spec(spec, "stopped.json");
  auto first = run_ddplab("run " + path);
  EXPECT_NE(first.exit_code, 0) << first.output;
  EXPECT_EQ(manifest(ws, "stopped")["checkpoint"]["step_in_epoch"], 28) << first.output;
  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_metrics(full_records, read_records(run_dir(ws, "stopped")));
  EXPECT_EQ(read_final_params(run_dir(ws, "full"), model), read_final_params(run_dir(ws, "stopped"), model))
      << "the average went on from the checkpoint exactly";
}

TEST(Reliability, SigtermStopsCleanlyAndTheRunContinuesExactlyOneReplica) { stop_and_resume(1); }

TEST(Reliability, SigtermStopsCleanlyAndTheRunContinuesExactlyTwoReplicas) { stop_and_resume(2); }

// Three processes and a model of two buckets (mnist_cnn, 20 steps per epoch), stopped at three
// points of epoch 1 and resumed: the resumed run reduces with the bucket layout the uninterrupted
// run rebuilt after its first step (kept in the checkpoint). With the initial layout, Gloo's ring
// summed the three ranks' gradients in another order and the records differed in their last bits.
TEST(Reliability, ThreeProcessesWithSeveralBucketsResumeExactly) {
  Workspace ws(960, 100);
  auto spec = ws.base_spec("full3");
  spec["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.0}};
  spec["batch"] = {{"global", 48}};
  spec["replicas"]["count"] = 3;
  auto full = run_ddplab("run " + ws.write_spec(spec, "full3.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  for (int step : {3, 7, 12}) {
    const std::string name = "stopped3_" + std::to_string(step);
    stop_then_resume(ws, spec, name, 1, step);
    SCOPED_TRACE("stopped at step " + std::to_string(step));
    expect_same_metrics(read_records(run_dir(ws, "full3")), read_records(run_dir(ws, name)));
  }
}

// PowerSGD keeps state from step to step: each rank's error feedback, the warm-start Qs, its
// iteration count and the generator of its random Qs' seeds. A run stopped mid-epoch (after
// PowerSGD started at step 3) and resumed gives the uninterrupted run's records, its traffic too;
// and PowerSGD did change the training (the fp32 run's records differ) and its bytes.
TEST(Reliability, PowerSgdResumesExactly) {
  Workspace ws(1024, 100);
  auto spec = reliability_spec(ws, "full", 2);
  spec["model"]["dropout"] = 0.0;
  auto plain = run_ddplab("run " + ws.write_spec(spec, "plain.json") + " name=plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  spec["replicas"]["compression"] = "powersgd";
  spec["replicas"]["powersgd"] = {{"rank", 1}, {"start_iter", 3}};
  auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  stop_then_resume(ws, spec, "stopped", 1, 13);
  const auto full_records = read_records(run_dir(ws, "full"));
  const auto resumed_records = read_records(run_dir(ws, "stopped"));
  const auto plain_records = read_records(run_dir(ws, "plain"));
  expect_same_metrics(full_records, resumed_records);
  ASSERT_EQ(full_records.size(), plain_records.size());
  for (size_t e = 0; e < full_records.size() && e < resumed_records.size(); ++e) {
    EXPECT_EQ(full_records[e]["comm_bytes"], resumed_records[e]["comm_bytes"]) << "epoch " << e + 1;
    EXPECT_LT(full_records[e]["comm_bytes"].get<double>(), plain_records[e]["comm_bytes"].get<double>() / 4);
    EXPECT_NE(full_records[e]["train_loss"], plain_records[e]["train_loss"]) << "epoch " << e + 1;
    // The noise scale's estimator needs the replicas' mean gradient, which PowerSGD does not
    // all-reduce (a lab run of 2026-12-08 recorded B_simple -39): not measured.
    EXPECT_TRUE(full_records[e]["grad_noise_scale"].is_null()) << full_records[e].dump();
    EXPECT_TRUE(plain_records[e]["grad_noise_scale"].is_number()) << plain_records[e].dump();
  }
}

// Local SGD and EASGD keep a model and momentum per replica. A stop between two averaging points
// (rank 1 asks in step 13, every rank agrees at the next averaging point) and a resume continue
// each replica from its own state: the records equal the uninterrupted run's. Before, every rank
// loaded rank 0's model and optimizer (a full average injected, EASGD's replicas reset).
TEST(Reliability, LocalSgdAndEasgdResumeEachReplicaExactly) {
  const std::vector<nlohmann::json> syncs{{{"local_sgd", {{"period", 4}}}},
                                          {{"easgd", {{"period", 4}, {"alpha", 0.25}}}}};
  for (const auto& sync : syncs) {
    SCOPED_TRACE(sync.dump());
    Workspace ws(1024, 100);
    auto spec = reliability_spec(ws, "full", 2);
    spec["model"]["dropout"] = 0.0;
    spec["replicas"]["sync"] = sync;
    auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
    ASSERT_EQ(full.exit_code, 0) << full.output;
    stop_then_resume(ws, spec, "stopped", 1, 13);
    const auto full_records = read_records(run_dir(ws, "full"));
    const auto resumed_records = read_records(run_dir(ws, "stopped"));
    expect_same_metrics(full_records, resumed_records);
    for (size_t e = 0; e < full_records.size() && e < resumed_records.size(); ++e)
      EXPECT_EQ(full_records[e]["replica_drift"], resumed_records[e]["replica_drift"]) << "epoch " << e + 1;
  }
}

// A weight EMA over a model with BatchNorm (resnet20) is evaluated and saved with the average of
// the running statistics, not the live model's: training is the same with and without the EMA, so
// the run without it saved the live statistics, and the EMA run's model.pt must hold others. A
// stop and resume continues both averages exactly.
TEST(Reliability, AWeightEmaKeepsBatchNormStatisticsOfItsOwnAndResumesExactly) {
  Workspace ws(256, 64);
  auto spec = ws.base_spec("live");
  spec["model"] = {{"name", "resnet20"}};
  spec["batch"] = {{"global", 32}};
  auto live = run_ddplab("run " + ws.write_spec(spec, "live.json"));
  ASSERT_EQ(live.exit_code, 0) << live.output;
  spec["name"] = "ema";
  spec["model"]["ema_decay"] = 0.9;
  auto ema = run_ddplab("run " + ws.write_spec(spec, "ema.json"));
  ASSERT_EQ(ema.exit_code, 0) << ema.output;
  auto running_means = [&](const std::string& name) {
    models::ModelOptions resnet;
    resnet.name = "resnet20";
    auto model = models::make_model(resnet, models::InputShape{});
    torch::load(model, (run_dir(ws, name) / "model.pt").string());
    std::vector<float> flat;
    for (const auto& b : model->named_buffers())
      if (b.key().find("running_mean") != std::string::npos)
        flat.insert(flat.end(), b.value().data_ptr<float>(), b.value().data_ptr<float>() + b.value().numel());
    return flat;
  };
  EXPECT_NE(running_means("live"), running_means("ema")) << "the EMA was saved with the live statistics";
  stop_then_resume(ws, spec, "stopped", 0, 10);
  expect_same_metrics(read_records(run_dir(ws, "ema")), read_records(run_dir(ws, "stopped")));
  EXPECT_EQ(running_means("ema"), running_means("stopped"));
}

// The [step, eval_loss, eval_acc] of the step records that hold an evaluation point.
std::vector<nlohmann::json> eval_points(const std::vector<nlohmann::json>& steps) {
  std::vector<nlohmann::json> points;
  for (const auto& r : steps)
    if (r.contains("eval_acc")) points.push_back({r["step"], r["eval_loss"], r["eval_acc"]});
  return points;
}

// log.eval_every_steps with two processes: the training records are those of the run without
// points (epochs.jsonl and the step records' training fields), and a run stopped between two
// points and resumed has the same points, at the same steps with the same values.
TEST(Reliability, EvaluationPointsChangeNoTrainingRecordAndSurviveAStop) {
  Workspace ws(1024, 100);  // 16 steps per epoch
  auto without = run_ddplab("run " + ws.write_spec(reliability_spec(ws, "without", 2), "without.json"));
  ASSERT_EQ(without.exit_code, 0) << without.output;
  auto spec = reliability_spec(ws, "full", 2);
  spec["log"]["eval_every_steps"] = 10;
  spec["log"]["eval_samples"] = 60;
  auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  expect_same_metrics(read_records(run_dir(ws, "without")), read_records(run_dir(ws, "full")));
  expect_same_steps(read_steps(run_dir(ws, "without")), read_steps(run_dir(ws, "full")));
  const auto points = eval_points(read_steps(run_dir(ws, "full")));
  ASSERT_EQ(points.size(), 6u) << "after steps 10 and 16 of each of 3 epochs";
  EXPECT_EQ(points[2][0], 26);
  EXPECT_EQ(manifest(ws, "full")["step_eval"], (nlohmann::json{{"every_steps", 10}, {"set", "test"}, {"samples", 60}}));
  stop_then_resume(ws, spec, "stopped", 1, 21);  // read one step late: stops after step 22
  EXPECT_EQ(eval_points(read_steps(run_dir(ws, "stopped"))), points);
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "stopped")));
}

// Two simulated replicas in one process (dropout on: each replica's RNG stream is in the
// checkpoint) stopped mid-epoch and resumed give the uninterrupted run's records.
TEST(Reliability, TwoSimulatedReplicasResumeExactly) {
  Workspace ws(1024, 100);
  auto spec = reliability_spec(ws, "full", 2);
  spec["replicas"]["mode"] = "simulated";
  auto full = run_ddplab("run " + ws.write_spec(spec, "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  stop_then_resume(ws, spec, "stopped", 0, 21);
  expect_same_metrics(read_records(run_dir(ws, "full")), read_records(run_dir(ws, "stopped")));
}

TEST(Reliability, NanFromAHugeLearningRateIsRecordedAsDiverged) {
  Workspace ws(1024, 100);
  for (int replicas : {1, 2}) {
    auto spec = ws.base_spec("nan" + std::to_string(replicas));
    spec["optimizer"]["lr"] = 1e6;
    spec["replicas"]["count"] = replicas;
    auto r = run_ddplab("run " + ws.write_spec(spec, "nan.json"));
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_NE(r.output.find("diverged at epoch 1, step"), std::string::npos) << r.output;
    auto m = manifest(ws, "nan" + std::to_string(replicas));
    EXPECT_EQ(m["status"], "diverged");
    EXPECT_TRUE(std::regex_search(m["message"].get<std::string>(), std::regex("gradient norm is (NaN|Inf)")))
        << m["message"];
  }
}

TEST(Reliability, ADifferentSpecDoesNotResumeAnotherRunsCheckpoint) {
  Workspace ws(1024, 100);
  auto spec = ws.base_spec("changed");
  spec["debug"] = {{"fault", "throw"}, {"rank", 0}, {"step", 20}};
  auto path = ws.write_spec(spec, "changed.json");
  ASSERT_EQ(run_ddplab("run " + path).exit_code, 1);
  auto r = run_ddplab("run " + path + " optimizer.lr=0.01");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("different spec (/optimizer/lr: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" -> 0.01)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddplab::testing
