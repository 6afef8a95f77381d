// The validation split, best.pt and early stopping through `ddplab run`, with real processes.
#include <gtest/gtest.h>

#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

// 1024 training samples, a quarter held out: 768 trained on, 12 steps of 64 an epoch.
nlohmann::json validation_spec(const Workspace& ws, const std::string& name) {
  auto spec = ws.base_spec(name);
  spec["dataset"]["validation"] = 0.25;
  spec["model"]["dropout"] = 0.3;
  spec["epochs"] = 4;
  return spec;
}

fs::path run_dir(const Workspace& ws, const std::string& name) { return ws.out() / name / "seed=3"; }

nlohmann::json manifest_of(const Workspace& ws, const std::string& name) {
  return nlohmann::json::parse(read_file(run_dir(ws, name) / "manifest.json"));
}

// best.pt's parameters, read as read_final_params reads model.pt.
std::vector<float> best_params(const Workspace& ws, const std::string& name, const nlohmann::json& model) {
  const fs::path dir = ws.dir().path() / (name + "-best");
  fs::create_directories(dir);
  fs::copy_file(run_dir(ws, name) / "best.pt", dir / "model.pt", fs::copy_options::overwrite_existing);
  return read_final_params(dir, model);
}

TEST(Validation, EveryEpochHasValidationMetricsAndFewerStepsAndBestPtIsTheBestEpochsModel) {
  Workspace ws(1024, 100);
  auto spec = validation_spec(ws, "split");
  spec["early_stop"]["metric"] = "val_acc";
  const RunOutput run = run_spec(ws, spec, "split");
  ASSERT_EQ(run.command.exit_code, 0) << run.command.output;
  ASSERT_EQ(run.records.size(), 4u);
  double best = -1;
  size_t best_epoch = 0;
  for (size_t e = 0; e < run.records.size(); ++e) {
    const auto& r = run.records[e];
    ASSERT_TRUE(r.contains("val_acc") && r["val_acc"].is_number()) << r.dump();
    EXPECT_EQ(r["step"], 12 * static_cast<int>(e + 1)) << "768 of the 1024 samples are trained on";
    if (r["val_acc"].get<double>() > best) best = r["val_acc"].get<double>(), best_epoch = e + 1;
  }
  EXPECT_NE(run.command.output.find("val loss"), std::string::npos) << run.command.output;
  // The same spec stopped after the best epoch saves that epoch's model as model.pt.
  auto shorter = spec;
  shorter["epochs"] = static_cast<int>(best_epoch);
  const RunOutput at_best = run_spec(ws, shorter, "at_best");
  ASSERT_EQ(at_best.command.exit_code, 0) << at_best.command.output;
  EXPECT_EQ(best_params(ws, "split", spec["model"]), at_best.params);
  EXPECT_FALSE(manifest_of(ws, "split").contains("early_stop"));
}

TEST(Validation, WithoutASplitTheRecordsHaveNoValidationKeysAndNoBestPt) {
  Workspace ws(1024, 100);
  auto spec = ws.base_spec("plain");
  const RunOutput run = run_spec(ws, spec, "plain");
  ASSERT_EQ(run.command.exit_code, 0) << run.command.output;
  for (const auto& r : run.records) EXPECT_FALSE(r.contains("val_loss") || r.contains("val_acc")) << r.dump();
  EXPECT_FALSE(fs::exists(run_dir(ws, "plain") / "best.pt"));
}

// min_delta 10 (in loss units): no epoch after the first improves, so patience 2 ends the run
// after epoch 3 of 6, done, and the manifest says so.
nlohmann::json stopping_spec(const Workspace& ws, const std::string& name) {
  auto spec = validation_spec(ws, name);
  spec["epochs"] = 6;
  spec["early_stop"] = {{"metric", "val_loss"}, {"patience", 2}, {"min_delta", 10}};
  return spec;
}

TEST(Validation, EarlyStoppingEndsTheRunWhenPatienceRunsOut) {
  Workspace ws(1024, 100);
  const RunOutput run = run_spec(ws, stopping_spec(ws, "stops"), "stops");
  ASSERT_EQ(run.command.exit_code, 0) << run.command.output;
  EXPECT_EQ(run.records.size(), 3u);
  const auto m = manifest_of(ws, "stops");
  EXPECT_EQ(m["status"], "done");
  EXPECT_EQ(m["early_stop"]["epochs_done"], 3);
  EXPECT_EQ(m["early_stop"]["best_epoch"], 1);
  EXPECT_EQ(m["early_stop"]["metric"], "val_loss");
  EXPECT_EQ(m["early_stop"]["best"], run.records[0]["val_loss"]);
  EXPECT_NE(run.command.output.find("stopped early after epoch 3"), std::string::npos) << run.command.output;
}

// A clean stop in epoch 3, in the middle of patience (epoch 2 did not improve), and the same
// command again: the same records, the same early end, the same best.pt.
TEST(Validation, AStopInTheMiddleOfPatienceResumesToTheSameEarlyEnd) {
  Workspace ws(1024, 100);
  auto spec = stopping_spec(ws, "full");
  spec["replicas"]["count"] = 2;
  const RunOutput full = run_spec(ws, spec, "full");
  ASSERT_EQ(full.command.exit_code, 0) << full.command.output;
  spec["name"] = "stopped";
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 28}};
  const std::string path = ws.write_spec(spec, "stopped.json");
  const auto first = run_ddplab("run " + path);
  ASSERT_EQ(manifest_of(ws, "stopped")["status"], "interrupted") << first.output;
  const auto second = run_ddplab("run " + path);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const auto resumed = read_records(run_dir(ws, "stopped"));
  ASSERT_EQ(resumed.size(), full.records.size());
  for (size_t e = 0; e < resumed.size(); ++e)
    for (const char* k : {"step", "train_loss", "val_loss", "val_acc", "test_loss", "test_acc", "grad_norm"})
      EXPECT_EQ(resumed[e][k], full.records[e][k]) << k << " in epoch " << e + 1;
  EXPECT_EQ(manifest_of(ws, "stopped")["early_stop"], manifest_of(ws, "full")["early_stop"]);
  EXPECT_EQ(best_params(ws, "stopped", spec["model"]), best_params(ws, "full", spec["model"]));
}

TEST(Validation, StoppingEarlyWithoutASplitIsRefusedNamingTheField) {
  Workspace ws(1024, 100);
  auto spec = ws.base_spec("nosplit");
  spec["early_stop"]["patience"] = 2;
  const auto r = run_ddplab("run " + ws.write_spec(spec, "nosplit.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/early_stop/patience: stopping early needs a validation split"), std::string::npos)
      << r.output;
}

// A split that leaves nothing to train on is found when the data is read, before the run
// directory is made: nothing of an earlier run is lost.
TEST(Validation, ASplitOfTheWholeTrainingSetIsRefusedBeforeAnythingIsWritten) {
  Workspace ws(1024, 100);
  auto spec = ws.base_spec("whole");
  spec["dataset"]["validation"] = 1024;
  const auto r = run_ddplab("run " + ws.write_spec(spec, "whole.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/dataset/validation: holds out 1024 of the 1024 training samples"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(run_dir(ws, "whole")));
}

}  // namespace
}  // namespace ddplab::testing
