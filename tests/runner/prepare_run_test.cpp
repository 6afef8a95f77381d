// prepare_run: the data and the set-up are checked before the run directory is touched, and what
// a directory that holds a run already becomes.
#include "ddplab/runner/prepare_run.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace ddplab::runner {
namespace {

// A spec on 64 + 32 tiny MNIST images (write_tiny_mnist) below `dir`.
config::ExperimentSpec tiny_spec(const testing::TempDir& dir) {
  testing::write_tiny_mnist(dir.path() / "data", 64, 32, false);
  return config::resolve({{"name", "prep"},
                          {"dataset", {{"name", "idx"}, {"root", dir.str("data")}}},
                          {"model", {{"name", "mlp"}, {"hidden", 8}}},
                          {"batch", {{"global", 32}}},
                          {"output", dir.str("out")}});
}

RunStart new_run() {
  RunStart start;
  start.resume = false;
  return start;
}

TEST(PrepareRun, MissingDataIsAnErrorThatWritesNothing) {
  testing::TempDir dir;
  auto spec = tiny_spec(dir);
  fs::remove_all(dir.path() / "data");
  EXPECT_THROW(prepare_run(spec, new_run()), Error);
  EXPECT_FALSE(fs::exists(rundir::run_dir(spec)));
}

TEST(PrepareRun, MakesARunningRunDirectoryWithTheData) {
  testing::TempDir dir;
  const auto spec = tiny_spec(dir);
  const PreparedRun run = prepare_run(spec, new_run());
  EXPECT_FALSE(run.resumed);
  EXPECT_EQ(run.log.dir(), rundir::run_dir(spec));
  EXPECT_EQ(rundir::read_status(run.log.dir()), rundir::RunStatus::kRunning);
  EXPECT_EQ(run.data.train.size(), 64);
}

TEST(PrepareRun, KeepsAFinishedRunUnlessItMayReplaceIt) {
  testing::TempDir dir;
  const auto spec = tiny_spec(dir);
  prepare_run(spec, new_run()).log.finish(rundir::RunStatus::kDone);
  RunStart start = new_run();
  start.replace = true;
  start.keep_finished = true;
  EXPECT_NE(testing::error_of([&] { prepare_run(spec, start); }).find("holds a finished run (status done)"),
            std::string::npos);
  start.keep_finished = false;
  EXPECT_EQ(rundir::read_status(prepare_run(spec, start).log.dir()), rundir::RunStatus::kRunning);
}

TEST(PrepareRun, ResumesAnUnfinishedRunWithACheckpoint) {
  testing::TempDir dir;
  const auto spec = tiny_spec(dir);
  const auto first = prepare_run(spec, new_run());
  testing::write_file(rundir::checkpoint_file(first.log.dir()), "not read here");
  first.log.update_manifest({{"checkpoint", {{"records", 0}, {"global_step", 0}, {"epochs_done", 0}}}});
  first.log.finish(rundir::RunStatus::kInterrupted);
  RunStart start;
  start.resume_reason = "test";
  const PreparedRun again = prepare_run(spec, start);
  EXPECT_TRUE(again.resumed);
  EXPECT_EQ(rundir::read_manifest(again.log.dir())["restarts"][0]["reason"], "test");
}

}  // namespace
}  // namespace ddplab::runner
