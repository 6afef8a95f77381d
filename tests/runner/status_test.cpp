// `ddplab status`: the state of a run from its manifest and its job, and the table (runner/status.h).
#include "ddplab/runner/status.h"

#include <gtest/gtest.h>

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
  const std::string table = status_table({{"seed=1", "done", "2/2", "0.8125", "1021", "COMPLETED"},
                                          {"replicas.count=2,seed=1", "pending", "-", "-", "1022", "PENDING (Resources)"}});
  EXPECT_EQ(table,
            "RUN                      STATE    EPOCH  TEST ACC  JOB   SLURM\n"
            "seed=1                   done     2/2    0.8125    1021  COMPLETED\n"
            "replicas.count=2,seed=1  pending  -      -         1022  PENDING (Resources)\n");
}

}  // namespace
}  // namespace ddplab::runner
