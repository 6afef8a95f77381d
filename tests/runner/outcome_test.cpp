// How a run ended -> the manifest's status, its message and the exit code, in one place.
#include "ddplab/runner/outcome.h"

#include <csignal>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/spec.h"
#include "ddplab/train/trainer.h"
#include "test_util.h"

namespace ddplab::runner {
namespace {

using rundir::RunStatus;

template <typename E>
Outcome outcome_of_thrown(const E& e) {
  try {
    throw e;
  } catch (...) {
    return outcome_of(std::current_exception());
  }
}

TEST(RunnerOutcome, TrainingThatReturnedIsDone) {
  const Outcome o = done_outcome();
  EXPECT_EQ(o.status, RunStatus::kDone);
  EXPECT_EQ(o.exit_code, kExitOk);
  EXPECT_EQ(o.message, "");
}

TEST(RunnerOutcome, DivergedIsDivergedWithExitCode3AndWhereItStopped) {
  const Outcome o = outcome_of_thrown(train::Diverged("NaN gradient at step 17", 2, 17));
  EXPECT_EQ(o.status, RunStatus::kDiverged);
  EXPECT_EQ(o.exit_code, kExitDiverged);
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.message, "NaN gradient at step 17");
  EXPECT_EQ(o.diverged_epoch, 2);
  EXPECT_EQ(o.diverged_step, 17);
}

TEST(RunnerOutcome, InterruptedIsInterruptedWith128PlusTheSignal) {
  const Outcome term = outcome_of_thrown(train::Interrupted("stopped by Terminated", SIGTERM));
  EXPECT_EQ(term.status, RunStatus::kInterrupted);
  EXPECT_EQ(term.exit_code, 143);
  EXPECT_EQ(term.message, "stopped by Terminated");
  EXPECT_EQ(outcome_of_thrown(train::Interrupted("stopped", SIGINT)).exit_code, exit_code_for_signal(SIGINT));
  EXPECT_FALSE(term.diverged_epoch.has_value());
}

TEST(RunnerOutcome, AUserErrorIsFailedWithExitCode2) {
  const Outcome o = outcome_of_thrown(Error("/epochs: must be >= 1, got 0"));
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.exit_code, kExitUserError);
  EXPECT_EQ(o.message, "/epochs: must be >= 1, got 0");
}

TEST(RunnerOutcome, AnyOtherExceptionIsFailedWithExitCode1) {
  const Outcome o = outcome_of_thrown(std::runtime_error("connection closed by peer"));
  EXPECT_EQ(o.status, RunStatus::kFailed);
  EXPECT_EQ(o.exit_code, kExitFailure);
  EXPECT_EQ(o.message, "connection closed by peer");
  try {
    throw std::logic_error("x");
  } catch (...) {
    EXPECT_EQ(exit_code_of(std::current_exception()), kExitFailure);
  }
  try {
    throw Error("x");
  } catch (...) {
    EXPECT_EQ(exit_code_of(std::current_exception()), kExitUserError);
  }
}

TEST(RunnerOutcome, LaunchResults) {
  launch::LaunchResult ok;
  EXPECT_EQ(outcome_of(ok).status, RunStatus::kDone);
  EXPECT_EQ(outcome_of(ok).exit_code, kExitOk);

  launch::LaunchResult diverged{kExitDiverged, -1, "NaN gradient at step 3"};
  EXPECT_EQ(outcome_of(diverged).status, RunStatus::kDiverged);
  EXPECT_EQ(outcome_of(diverged).exit_code, kExitDiverged);
  EXPECT_EQ(outcome_of(diverged).message, "NaN gradient at step 3");

  launch::LaunchResult failed{kExitFailure, 1, "exited with code 1: injected fault"};
  EXPECT_EQ(outcome_of(failed).status, RunStatus::kFailed);
  EXPECT_EQ(outcome_of(failed).exit_code, kExitFailure);
  EXPECT_EQ(outcome_of(failed).message, "rank 1 exited with code 1: injected fault");

  launch::LaunchResult stopped{exit_code_for_signal(SIGINT), -1, "interrupted by Interrupt"};
  EXPECT_EQ(outcome_of(stopped).status, RunStatus::kInterrupted);
  EXPECT_EQ(outcome_of(stopped).exit_code, 130);
  EXPECT_EQ(outcome_of(stopped).message, "interrupted by Interrupt");
}

TEST(RunnerOutcome, RecordWritesStatusMessageAndWhereARunDiverged) {
  testing::TempDir dir;
  const auto spec = config::resolve({{"name", "rec"}, {"output", dir.str()}});
  const auto run = rundir::RunLog::create(spec, false);
  record(run, outcome_of_thrown(train::Diverged("loss blew up", 4, 99)));
  auto m = rundir::read_manifest(run.dir());
  EXPECT_EQ(rundir::read_status(run.dir()), RunStatus::kDiverged);
  EXPECT_EQ(m.value("message", ""), "loss blew up");
  EXPECT_EQ(m.value("diverged_epoch", 0), 4);
  EXPECT_EQ(m.value("diverged_step", 0), 99);

  record(run, outcome_of_thrown(Error("bad")));
  EXPECT_EQ(rundir::read_status(run.dir()), RunStatus::kFailed);
  EXPECT_EQ(rundir::read_manifest(run.dir()).value("message", ""), "bad");
}

}  // namespace
}  // namespace ddplab::runner
