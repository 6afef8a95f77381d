// `ddplab status`: the state of a run from its manifest and its job, and the table (runner/status.h).
#include "ddplab/runner/status.h"

#include <gtest/gtest.h>

#include "ddplab/base/exit_codes.h"
#include "ddplab/runner/sweep.h"
#include "integration/integration_util.h"

namespace ddplab::runner {
namespace {

using rundir::RunStatus;

TEST(RunStatusTable, AFinishedRunIsItsStatusWhateverItsJobSays) {
  EXPECT_EQ(run_state(RunStatus::kDone, "COMPLETING"), "done");
  EXPECT_EQ(run_state(RunStatus::kDiverged, ""), "diverged");
}

TEST(RunStatusTable, WhileItsJobMayRunARunIsTheJobsState) {
  EXPECT_EQ(run_state(std::nullopt, "PENDING"), "pending");
  EXPECT_EQ(run_state(RunStatus::kInterrupted, "PENDING"), "pending") << "resubmitted after an interruption";
  EXPECT_EQ(run_state(RunStatus::kRunning, "RUNNING"), "running");
}

TEST(RunStatusTable, AfterItsJobEndedARunIsItsManifestsStatus) {
  EXPECT_EQ(run_state(RunStatus::kRunning, "CANCELLED"), "running") << "killed: the SLURM column says CANCELLED";
  EXPECT_EQ(run_state(RunStatus::kFailed, "FAILED"), "failed");
  EXPECT_EQ(run_state(std::nullopt, "CANCELLED"), "not started");
  EXPECT_EQ(run_state(std::nullopt, ""), "not started");
}

TEST(RunStatusTable, ColumnsAreAlignedUnderAHeader) {
  const std::string table =
      status_table({{"seed=1", "done", "2/2", "0.8125", "1021", "COMPLETED", ""},
                    {"replicas.count=2,seed=1", "pending", "-", "-", "1022", "PENDING (Resources)", ""}});
  EXPECT_EQ(table,
            "RUN                      STATE    EPOCH  TEST ACC  JOB   SLURM\n"
            "seed=1                   done     2/2    0.8125    1021  COMPLETED\n"
            "replicas.count=2,seed=1  pending  -      -         1022  PENDING (Resources)\n");
}

// A sweep stopped half-way: status lists every run, the one not started as pending, and says why
// the failed and the interrupted one ended.
TEST(RunStatusCommand, AHalfRunSweepListsAllItsRunsAndWhyEachBadOneEnded) {
  testing::Workspace ws(256, 128);
  auto spec = ws.base_spec("half");
  spec["epochs"] = 1;
  spec["debug"] = {{"rank", 0}, {"step", 1}};
  const auto path = ws.write_spec(testing::sweep_running_in_order(spec, "debug.fault", {"throw", "stop", "none"}));
  ::testing::internal::CaptureStdout();
  const int code = run_sweep(path, {}, false, false);
  ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(is_signal_exit_code(code)) << code;

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(status_command((ws.out() / "half").string()), kExitOk);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("debug.fault=none,seed=3   pending"), std::string::npos) << out;
  EXPECT_NE(out.find("ddplab: 3 runs: 1 failed, 1 interrupted, 1 pending"), std::string::npos) << out;
  EXPECT_NE(out.find("debug.fault=throw,seed=3: failed (exit code 1): injected fault (debug.fault=throw) at step 1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("debug.fault=stop,seed=3: interrupted (exit code 1"), std::string::npos) << out;
}

// Writes exp/seed=1 under `root`: a 2-epoch run whose records sit at chance (10.00% and 10.15%
// test accuracy, training at chance alike), with `manifest`; returns exp/.
std::filesystem::path write_run_at_chance(const std::filesystem::path& root, const nlohmann::json& manifest) {
  const auto dir = root / "exp" / "seed=1";
  std::filesystem::create_directories(dir);
  testing::write_file(rundir::spec_file(dir), R"({"epochs": 2})");
  std::string records;  // read as every reader reads them (rundir/run_reader.h): whole records
  for (const double acc : {0.1, 0.1015}) {
    rundir::EpochRecord r;
    r.epoch = acc == 0.1 ? 1 : 2;
    r.test_acc = acc;
    r.train_acc = acc;
    r.train_loss = 2.3026;
    records += r.to_json().dump() + "\n";
  }
  testing::write_file(rundir::epochs_file(dir), records);
  testing::write_file(rundir::manifest_file(dir), manifest.dump());
  return root / "exp";
}

TEST(RunStatusCommand, ARunThatCollapsedIsShownCollapsedWithWhy) {
  testing::TempDir tmp;
  const auto exp =
      write_run_at_chance(tmp.path(), {{"status", "collapsed"},
                                       {"exit_code", kExitCollapsed},
                                       {"message", "collapsed to chance: test accuracy 10.15% (chance 10.00%)"}});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(status_command(exp.string()), kExitOk);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("seed=1  collapsed  2/2    10.15%"), std::string::npos) << out;
  EXPECT_NE(out.find("ddplab: 1 run: 1 collapsed"), std::string::npos) << out;
  EXPECT_NE(out.find("seed=1: collapsed (exit code 4): collapsed to chance: test accuracy 10.15% (chance 10.00%)"),
            std::string::npos)
      << out;
}

// A run an older ddplab marked done though it sat at chance: status judges it by its records.
TEST(RunStatusCommand, AnOldDoneRunAtChanceIsShownCollapsed) {
  testing::TempDir tmp;
  const auto exp = write_run_at_chance(tmp.path(), {{"status", "done"}, {"exit_code", 0}});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(status_command(exp.string()), kExitOk);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("seed=1  collapsed  2/2    10.15%"), std::string::npos) << out;
  EXPECT_NE(out.find("seed=1: collapsed to chance: test accuracy 10.15%"), std::string::npos) << out;
  EXPECT_NE(out.find("(judged from its records; its manifest, written by an older ddplab, says done)"),
            std::string::npos)
      << out;
}

// Was batch.global=256 before batch.global=64 (sorted as text).
TEST(RunStatusCommand, RunsAreSortedWithTheirNumbersAsNumbers) {
  testing::TempDir tmp;
  for (const char* id : {"batch.global=256,lr=0.2", "batch.global=64,lr=0.2", "batch.global=64,lr=0.05"}) {
    const auto dir = tmp.path() / "exp" / id;
    std::filesystem::create_directories(dir);
    testing::write_file(rundir::manifest_file(dir), R"({"status": "done"})");
  }
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(status_command((tmp.path() / "exp").string()), kExitOk);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const auto at = [&](const char* id) { return out.find(std::string(id) + " "); };
  EXPECT_LT(at("batch.global=64,lr=0.05"), at("batch.global=64,lr=0.2")) << out;
  EXPECT_LT(at("batch.global=64,lr=0.2"), at("batch.global=256,lr=0.2")) << out;
}

}  // namespace
}  // namespace ddplab::runner
