// The command line end to end: bad input gets exit code 2, a message naming the culprit and
// no run directory; identical runs give identical metrics.
#include <fstream>

#include <gtest/gtest.h>

#include "ddplab/rundir/run_log.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

void expect_user_error(const Workspace& ws, const std::string& spec_path, const std::string& args,
                       const std::string& culprit) {
  auto r = run_ddplab("run " + spec_path + " " + args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(culprit), std::string::npos) << "expected '" << culprit << "' in: " << r.output;
  EXPECT_FALSE(fs::exists(ws.out() / "bad")) << "a run directory was left behind";
}

// Was "Target test accuracy", while a report of runs with a validation split reads it on validation.
TEST(Cli, ReportHelpSaysWhichAccuracyTheTargetIs) {
  const auto r = run_ddplab("report --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validation accuracy when every run has a validation"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Target test accuracy"), std::string::npos) << r.output;
}

TEST(Cli, MalformedJsonNamesFileLineAndColumn) {
  Workspace ws(64, 32);
  auto path = ws.dir().str("broken.json");
  write_file(path, "{\n  \"name\": \"bad\",\n  \"epochs\": ,\n}\n");
  expect_user_error(ws, path, "", "broken.json:3:");
}

TEST(Cli, UnknownKeyIsRejectedWithSuggestion) {
  Workspace ws(64, 32);
  auto spec = ws.base_spec("bad");
  spec["optimiser"] = spec["optimizer"];
  expect_user_error(ws, ws.write_spec(spec), "", "/optimiser: unknown key; did you mean \"optimizer\"?");
}

TEST(Cli, WrongTypeNamesThePointer) {
  Workspace ws(64, 32);
  expect_user_error(ws, ws.write_spec(ws.base_spec("bad")), "epochs='\"ten\"'", "/epochs");
}

TEST(Cli, OutOfRangeValueSaysWhatWasExpected) {
  Workspace ws(64, 32);
  expect_user_error(ws, ws.write_spec(ws.base_spec("bad")), "optimizer.lr=-1", "/optimizer/lr: must be > 0, got -1");
}

TEST(Cli, MissingDataDirectoryIsAUserError) {
  Workspace ws(64, 32);
  auto spec = ws.base_spec("bad");
  spec["dataset"]["root"] = ws.dir().str("nowhere");
  expect_user_error(ws, ws.write_spec(spec), "", "nowhere");
}

TEST(Cli, TruncatedIdxFileIsAUserError) {
  Workspace ws(64, 32);
  fs::path images = ws.data() / "train-images-idx3-ubyte.gz";
  fs::remove(images);
  // A raw file cut short: header says 64 images of 28x28, only 1000 bytes follow.
  std::vector<char> bytes = {0, 0, 8, 3, 0, 0, 0, 64, 0, 0, 0, 28, 0, 0, 0, 28};
  bytes.resize(16 + 1000, 1);
  std::ofstream(ws.data() / "train-images-idx3-ubyte", std::ios::binary).write(bytes.data(), bytes.size());
  expect_user_error(ws, ws.write_spec(ws.base_spec("bad")), "", "train-images-idx3-ubyte");
}

TEST(Cli, WeightDecayGroupThatMatchesNoParameterIsAUserError) {
  Workspace ws(64, 32);
  auto spec = ws.base_spec("bad");
  spec["optimizer"]["weight_decay_groups"] = {{{"match", "^conv"}, {"weight_decay", 0.1}}};
  // mlp has fc1.* and fc2.* only; found when the model is built, still before a run directory.
  expect_user_error(ws, ws.write_spec(spec), "", "/optimizer/weight_decay_groups/0/match: matches no parameter");
}

TEST(Cli, BadOverrideIsAUserError) {
  Workspace ws(64, 32);
  expect_user_error(ws, ws.write_spec(ws.base_spec("bad")), "replicas.count=0", "/replicas/count");
}

// Found once the data are read, still before anything is written: --force must not have wiped
// the finished run for a spec that cannot run a single step.
// validate and --dry-run refuse what the run would refuse before training, with the same message.
TEST(Cli, ValidateAndADryRunRefuseWhatTheRunWouldRefuse) {
  Workspace ws(64, 32);
  auto spec = ws.base_spec("bad");
  spec["dataset"]["root"] = "nowhere-data";
  const auto path = ws.write_spec(spec);
  for (const std::string command : {"validate ", "run --dry-run "}) {
    auto r = run_ddplab(command + path);
    EXPECT_EQ(r.exit_code, 2) << command << r.output;
    EXPECT_NE(r.output.find("data directory nowhere-data, relative to the working directory "), std::string::npos)
        << command << r.output;
  }
  spec["dataset"]["root"] = ws.data().string();
  ws.write_spec(spec);
  for (const std::string command : {"validate ", "run --dry-run "}) {
    auto r = run_ddplab(command + path + " batch.global=128");
    EXPECT_EQ(r.exit_code, 2) << command << r.output;
    EXPECT_NE(r.output.find("/batch: the global batch 128 (1 x 128) is larger than the 64 training samples"),
              std::string::npos)
        << command << r.output;
  }
  auto missing = run_ddplab("validate " + ws.dir().str("absent.json"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("absent.json: no such spec file"), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(ws.out() / "bad")) << "nothing was written";
}

TEST(Cli, GlobalBatchLargerThanTheTrainingSetKeepsTheFinishedRun) {
  Workspace ws(64, 32);
  auto path = ws.write_spec(ws.base_spec("keep"));
  auto ok = run_ddplab("run " + path);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  auto r = run_ddplab("run --force " + path + " batch.global=128");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/batch: the global batch 128 (1 x 128) is larger than the 64 training samples"),
            std::string::npos)
      << r.output;
  fs::path dir = ws.out() / "keep" / "seed=3";
  EXPECT_EQ(read_records(dir).size(), 2u) << "the finished run's records are intact";
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "manifest.json"))["status"], "done");
}

// Under torchrun or srun (`ddplab worker` with RANK and WORLD_SIZE set), a first attempt does not
// replace a finished run either; DDPLAB_FORCE=1 does.
TEST(Cli, WorkerDoesNotReplaceAFinishedRunUnlessForced) {
  Workspace ws(64, 32);
  auto path = ws.write_spec(ws.base_spec("again"));
  const std::string worker = "RANK=0 WORLD_SIZE=1 " + std::string(DDPLAB_BIN) + " worker " + path;
  auto first = run_command(worker);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  fs::path dir = ws.out() / "again" / "seed=3";
  auto second = run_command(worker);
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find(dir.string() + ": holds a finished run (status done); set DDPLAB_FORCE=1"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(read_records(dir).size(), 2u);
  auto forced = run_command("DDPLAB_FORCE=1 " + worker);
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(read_records(dir).size(), 2u);
}

TEST(Cli, ValidateChecksEveryRunOfASweepAndWorkerRefusesOne) {
  Workspace ws(64, 32);
  auto path = ws.write_spec(ws.base_spec("sw"));
  auto bad = run_ddplab("validate " + path + " 'sweep={\"optimizer.lr\":[0.1,-1]}'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("/sweep/optimizer.lr/1: must be > 0, got -1"), std::string::npos) << bad.output;
  auto good = run_ddplab("validate " + path + " 'sweep={\"optimizer.lr\":[0.1,0.2]}' repeats=2");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_NE(good.output.find("a sweep of 4 runs, all valid"), std::string::npos) << good.output;
  auto worker = run_command("RANK=0 WORLD_SIZE=1 " + std::string(DDPLAB_BIN) + " worker " + path + " repeats=2");
  EXPECT_EQ(worker.exit_code, 2) << worker.output;
  EXPECT_NE(worker.output.find("has sweep keys"), std::string::npos) << worker.output;
  EXPECT_FALSE(fs::exists(ws.out() / "sw"));
}

TEST(Cli, ReportOfAMissingDirectoryOrABadTargetIsAUserErrorThatCreatesNothing) {
  Workspace ws(64, 32);
  const std::string missing = ws.dir().str("no_runs_here");
  auto r = run_ddplab("report " + missing);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(missing + ": does not exist"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(missing)) << "the report must not create the directory it was asked to read";
  auto t = run_ddplab("report " + ws.dir().str("") + " --target 5");
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find("--target: must be a test accuracy in (0, 1], e.g. 0.9, got 5"), std::string::npos)
      << t.output;
  auto e = run_ddplab("report " + ws.dir().str("") + " --equivalence-pts -1");
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_NE(e.output.find("--equivalence-pts: must be accuracy points in (0, 100], e.g. 0.5, got -1"),
            std::string::npos)
      << e.output;
  auto l = run_ddplab("report " + ws.dir().str("") + " --target-loss -0.5");
  EXPECT_EQ(l.exit_code, 2) << l.output;
  EXPECT_NE(l.output.find("--target-loss: must be a training loss in (0, 1e6], e.g. 0.5, got -0.5"), std::string::npos)
      << l.output;
  auto k = run_ddplab("report " + ws.dir().str("") + " --final-epochs -2");
  EXPECT_EQ(k.exit_code, 2) << k.output;
  EXPECT_NE(k.output.find("--final-epochs: must be an integer in [1, 100000], got -2"), std::string::npos) << k.output;
}

TEST(Cli, UnknownCommandIsNamedWithTheChoices) {
  auto r = run_ddplab("trian x.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown command \"trian\"; commands: run, validate, schema, report, worker"),
            std::string::npos)
      << r.output;
}

TEST(Cli, ValidatePrintsResolvedSpecAndSchemaPrintsSchema) {
  Workspace ws(64, 32);
  auto r = run_ddplab("validate " + ws.write_spec(ws.base_spec("ok")) + " epochs=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto resolved = nlohmann::json::parse(r.output);
  EXPECT_EQ(resolved["epochs"], 5);
  EXPECT_EQ(resolved["schedule"]["scale_rule"], "none");
  auto s = run_ddplab("schema");
  ASSERT_EQ(s.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(s.output)["title"], "ddplab experiment spec");
}

TEST(Cli, RunWritesRunDirectoryAndRecords) {
  Workspace ws;
  auto r = run_ddplab("run " + ws.write_spec(ws.base_spec("ok")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::path dir = ws.out() / "ok" / "seed=3";
  EXPECT_NE(r.output.find(dir.string()), std::string::npos) << "the run must say where its logs are";
  for (const char* f : {"spec.json", "manifest.json", "epochs.jsonl", "epochs.csv", "model.pt"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  auto records = read_records(dir);
  ASSERT_EQ(records.size(), 2u);
  for (const char* k : {"epoch", "step", "lr", "train_loss", "train_acc", "test_loss", "test_acc", "epoch_s", "wall_s",
                        "images_per_s", "comm_wait_s", "grad_norm", "replicas", "global_batch"})
    EXPECT_TRUE(records[1].contains(k)) << k;
  EXPECT_EQ(records[1]["step"], 2 * (512 / 64));
  EXPECT_GT(records[1]["test_acc"].get<double>(), 0.5) << "the tiny dataset is learnable";
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["status"], "done");
  // A second run of the same spec refuses to overwrite without --force.
  auto again = run_ddplab("run " + ws.dir().str("spec.json"));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos);
}

// Under nohup, CI or SLURM stdout is no terminal: every rank prints a plain progress line every
// log.progress_s seconds (here every step), rank 0 to the console and each rank to its log; a run
// of 2 replicas ends with its test accuracy as a run of 1 does.
TEST(Cli, WithoutATerminalEveryRankPrintsPlainProgressLines) {
  Workspace ws;
  auto spec = ws.base_spec("progress");
  spec["epochs"] = 1;
  spec["replicas"]["count"] = 2;
  spec["log"] = {{"progress_s", 1e-6}};
  auto r = run_ddplab("run " + ws.write_spec(spec));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 epoch; logs in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0: epoch 1/1  step 2/8  "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" img/s  ETA "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ddplab: done, test accuracy "), std::string::npos) << r.output;
  const std::string rank1 = read_file(ws.out() / "progress" / "seed=3" / "rank-1.log");
  EXPECT_NE(rank1.find("rank 1: epoch 1/1  step 8/8  "), std::string::npos) << rank1;

  spec["log"] = {{"progress_s", 0}};
  auto quiet = run_ddplab("run " + ws.write_spec(spec) + " --force");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find(" img/s  ETA "), std::string::npos) << quiet.output;
}

TEST(Cli, SameSpecAndSeedGiveIdenticalMetrics) {
  Workspace ws;
  auto spec = ws.base_spec("det");
  spec["model"]["dropout"] = 0.3;
  auto path = ws.write_spec(spec);
  auto strip = [](std::vector<nlohmann::json> records) {
    for (auto& r : records)
      for (const auto& k : rundir::EpochRecord::machine_fields()) r.erase(k);
    return records;
  };
  ASSERT_EQ(run_ddplab("run " + path).exit_code, 0);
  auto first = strip(read_records(ws.out() / "det" / "seed=3"));
  ASSERT_EQ(run_ddplab("run " + path + " --force").exit_code, 0);
  auto second = strip(read_records(ws.out() / "det" / "seed=3"));
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace ddplab::testing
