#include "ddplab/tensorboard/export.h"

#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/tensorboard/events.h"
#include "report/fake_run.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace ddplab;
using namespace ddplab::tensorboard;
using ddplab::testing::error_of;
using ddplab::testing::FakeRun;
using ddplab::testing::TempDir;
using ddplab::testing::write_run;
using nlohmann::json;

namespace {

constexpr double kStart = 1767225600;  // FakeRun's manifest start, 2026-01-01T00:00:00Z

// A sweep of replicas.count 1 and 2 over seeds 1 and 2; seed 2 at 2 replicas was interrupted.
void write_sweep(const fs::path& root) {
  for (int replicas : {1, 2})
    for (int seed : {1, 2}) {
      FakeRun r;
      r.replicas = replicas;
      r.seed = seed;
      if (replicas == 2 && seed == 2) r.status = "interrupted";
      if (replicas == 1 && seed == 1)
        r.steps = {{{"step", 50},
                    {"epoch", 0.5},
                    {"interval_steps", 50},
                    {"lr", 0.01},
                    {"train_loss", 2.0},
                    {"train_acc", 0.3},
                    {"samples", 3200},
                    {"elapsed_s", 5.0}}};
      write_run(root, r);
    }
}

std::set<fs::path> files_below(const fs::path& dir) {
  std::set<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(e.path());
  return out;
}

bool holds(const std::vector<std::string>& records, const std::string& event) {
  return std::find(records.begin(), records.end(), event) != records.end();
}

}  // namespace

// A run that says when its training clock started (train_start) has its scalars at that time plus
// wall_s; its session still starts at the run's start.
TEST(TensorBoardExport, ScalarsCountFromTheTrainingClocksStart) {
  TempDir tmp;
  FakeRun r;
  r.manifest_patch = {{"train_start", "2026-01-01T00:00:01.500Z"}};
  const fs::path dir = write_run(tmp.path() / "runs", r);
  export_runs({{tmp.path() / "runs"}, tmp.path() / "tb"});
  const auto records =
      read_records(tmp.path() / "tb" / "exp" / dir.filename() / "events.out.tfevents.1767225600.ddplab");
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(records[0], file_version_event(kStart));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 1.5 + 24, 200 * 64, "test/acc", 0.7f)));
  EXPECT_FALSE(holds(records, scalar_event(kStart + 24, 200 * 64, "test/acc", 0.7f)));
}

TEST(TensorBoardExport, WritesOneEventFilePerRunAtSamplesSeen) {
  TempDir tmp;
  write_sweep(tmp.path() / "runs");
  const auto before = files_below(tmp.path() / "runs");
  const auto summary = export_runs({{tmp.path() / "runs"}, tmp.path() / "tb"});
  EXPECT_EQ(files_below(tmp.path() / "runs"), before);  // the runs are only read
  ASSERT_EQ(summary.files.size(), 4u);
  const fs::path run = tmp.path() / "tb" / "exp" / "replicas.count=2,schedule.scale_rule=none,seed=1";
  const auto records = read_records(run / "events.out.tfevents.1767225600.ddplab");
  // file_version, session start, 3 epochs x 8 scalars (no comm_bytes, no noise scale), session end
  ASSERT_EQ(records.size(), 1u + 1u + 3u * 8u + 1u);
  EXPECT_EQ(records[0], file_version_event(kStart));
  // Epoch 2: step 200 of global batch 2 x 64, wall_s 24.
  const int64_t samples = 200 * 128;
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "test/acc", 0.7f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "train/loss", 0.5f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "lr", 0.005f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "comm_wait_s", 0.1f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "images_per_s", 100.0f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, samples, "epoch", 2.0f)));
  // The step record of replicas=1, seed=1, at its samples, before epoch 1's scalars (step 6400).
  const auto one = read_records(tmp.path() / "tb" / "exp" / "replicas.count=1,schedule.scale_rule=none,seed=1" /
                                "events.out.tfevents.1767225600.ddplab");
  ASSERT_EQ(one.size(), 1u + 1u + 3u * 8u + 3u + 1u);
  EXPECT_EQ(one[2], scalar_event(kStart + 5, 3200, "steps/train_loss", 2.0f));
}

// A run with a validation split (dataset.validation) also gets val/loss and val/acc per epoch.
TEST(TensorBoardExport, ValidationMetricsAreTheirOwnTags) {
  TempDir tmp;
  FakeRun r;
  r.val_acc = {0.5, 0.625, 0.75};
  const fs::path dir = write_run(tmp.path() / "runs", r);
  export_runs({{tmp.path() / "runs"}, tmp.path() / "tb"});
  const auto records =
      read_records(tmp.path() / "tb" / "exp" / dir.filename() / "events.out.tfevents.1767225600.ddplab");
  ASSERT_EQ(records.size(), 1u + 1u + 3u * 10u + 1u);
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, 200 * 64, "val/acc", 0.625f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 24, 200 * 64, "val/loss", 0.375f)));
}

// Evaluation points (log.eval_every_steps) are their own tags at the step record's samples; a step
// record without one writes neither.
TEST(TensorBoardExport, EvaluationPointsAreTheirOwnTags) {
  TempDir tmp;
  FakeRun r;
  const json interval = {{"epoch", 0.5}, {"interval_steps", 50}, {"lr", 0.01}, {"train_loss", 2.0}, {"train_acc", 0.3}};
  json with_point = interval, without = interval;
  with_point.update({{"step", 50}, {"samples", 3200}, {"elapsed_s", 5.0}, {"eval_loss", 1.5}, {"eval_acc", 0.625}});
  without.update({{"step", 100}, {"samples", 6400}, {"elapsed_s", 9.0}});
  r.steps = {with_point, without};
  const fs::path dir = write_run(tmp.path() / "runs", r);
  export_runs({{tmp.path() / "runs"}, tmp.path() / "tb"});
  const auto records =
      read_records(tmp.path() / "tb" / "exp" / dir.filename() / "events.out.tfevents.1767225600.ddplab");
  EXPECT_TRUE(holds(records, scalar_event(kStart + 5, 3200, "steps/eval_loss", 1.5f)));
  EXPECT_TRUE(holds(records, scalar_event(kStart + 5, 3200, "steps/eval_acc", 0.625f)));
  // file_version, session start, 3 epochs x 8 scalars, 3 + 2 + 3 step scalars, session end
  EXPECT_EQ(records.size(), 1u + 1u + 3u * 8u + 8u + 1u);
}

TEST(TensorBoardExport, SessionsGroupSeedsByTheReportsLabel) {
  TempDir tmp;
  write_sweep(tmp.path() / "runs");
  export_runs({{tmp.path() / "runs"}, tmp.path() / "tb"});
  const auto read = [&](const std::string& id) {
    return read_records(tmp.path() / "tb" / "exp" / id / "events.out.tfevents.1767225600.ddplab");
  };
  const auto done = read("replicas.count=2,schedule.scale_rule=none,seed=1");
  SessionStart start{{{"replicas.count", 2.0}, {"seed", 1.0}}, "replicas.count=2", kStart};
  EXPECT_EQ(done[1], session_start_event(kStart, start));
  // No "end" in the manifest: the last record's wall time.
  EXPECT_EQ(done.back(), session_end_event(kStart + 36, SessionStatus::kSuccess, kStart + 36));
  const auto interrupted = read("replicas.count=2,schedule.scale_rule=none,seed=2");
  start.hparams["seed"] = 2.0;
  EXPECT_EQ(interrupted[1], session_start_event(kStart, start));
  EXPECT_EQ(interrupted.back(), session_end_event(kStart + 36, SessionStatus::kFailure, kStart + 36));
}

TEST(TensorBoardExport, SessionStatusOfEachManifestStatus) {
  EXPECT_EQ(session_status(rundir::RunStatus::kDone), SessionStatus::kSuccess);
  EXPECT_EQ(session_status(rundir::RunStatus::kFailed), SessionStatus::kFailure);
  EXPECT_EQ(session_status(rundir::RunStatus::kDiverged), SessionStatus::kFailure);
  EXPECT_EQ(session_status(rundir::RunStatus::kInterrupted), SessionStatus::kFailure);
  EXPECT_EQ(session_status(rundir::RunStatus::kRunning), SessionStatus::kRunning);
  EXPECT_EQ(session_status(std::nullopt), SessionStatus::kUnknown);
}

TEST(TensorBoardExport, RefusesBadInputAndOutputsInsideRuns) {
  TempDir tmp;
  write_sweep(tmp.path() / "runs");
  EXPECT_NE(error_of([&] { export_runs({{tmp.path() / "nowhere"}, tmp.path() / "tb"}); }).find("nowhere"),
            std::string::npos);
  const fs::path run = tmp.path() / "runs" / "exp" / "replicas.count=1,schedule.scale_rule=none,seed=1";
  EXPECT_NE(error_of([&] { export_runs({{tmp.path() / "runs"}, run / "tb"}); }).find("lies inside the run directory"),
            std::string::npos);
  // --out at the runs' own root would write <root>/exp/<run_id>/, the run directories themselves.
  EXPECT_NE(error_of([&] {
              export_runs({{tmp.path() / "runs"}, tmp.path() / "runs"});
            }).find("would write into the run directory"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(tmp.path() / "tb"));
}

TEST(TensorBoardExport, CliExportsAndNamesABadDirectory) {
  TempDir tmp;
  write_sweep(tmp.path() / "runs");
  const auto ok = ddplab::testing::run_ddplab("export tensorboard " + tmp.str("runs") + " --out " + tmp.str("tb"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("4 runs exported"), std::string::npos) << ok.output;
  const auto bad = ddplab::testing::run_ddplab("export tensorboard " + tmp.str("nope") + " --out " + tmp.str("tb"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("nope"), std::string::npos) << bad.output;
}
