// log.tensorboard with real training (runner/live_tensorboard.h, tensorboard/live.h): the event
// file is written as the run trains, and a killed run that resumes holds each step once.
#include "ddplab/runner/live_tensorboard.h"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/tensorboard/events.h"
#include "ddplab/tensorboard/export.h"
#include "integration/integration_util.h"
#include "tensorboard/event_file_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

// 4096 samples / global batch 64 = 64 steps per epoch, 3 epochs, step records every 10 steps;
// rank `crash_rank` is killed (SIGKILL) at step 100, in epoch 2.
nlohmann::json killed_spec(const Workspace& ws, const std::string& name, int replicas, int crash_rank) {
  auto spec = ws.base_spec(name);
  spec["replicas"]["count"] = replicas;
  spec["epochs"] = 3;
  spec["log"] = {{"every_steps", 10}, {"tensorboard", true}};
  spec["debug"] = {{"fault", "crash"}, {"rank", crash_rank}, {"step", 100}};
  return spec;
}

// The live file's records from `first` on, but a session end at the end.
std::vector<std::string> scalars_of(const std::vector<std::string>& records, size_t first) {
  const bool ended = records.back().find(tensorboard::kSessionEndTag) != std::string::npos;
  return {records.begin() + static_cast<std::ptrdiff_t>(first), records.end() - (ended ? 1 : 0)};
}

// Runs the killed spec, checks what the file held when training stopped, resumes, checks again.
void kill_and_resume(int replicas, int crash_rank) {
  Workspace ws(4096, 200);
  const std::string name = fmt::format("live{}", replicas);
  const std::string path = ws.write_spec(killed_spec(ws, name, replicas, crash_rank), name + ".json");
  const fs::path dir = ws.out() / name / "seed=3";
  const auto first = run_ddplab("run " + path);
  ASSERT_NE(first.exit_code, 0) << first.output;
  ASSERT_EQ(read_records(dir).size(), 1u) << first.output;  // epoch 1 of 3 done, then killed
  auto files = event_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const auto live = tensorboard::read_records(files[0]);
  const auto epoch1 = exported_scalars(dir, ws.dir().path() / "tb");
  EXPECT_FALSE(epoch1.empty());
  // Written while it trained (a killed rank 0 wrote nothing at an end): epoch 1's records.
  EXPECT_EQ(scalars_of(live, 2), epoch1);

  const auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  files = event_files(dir);
  ASSERT_EQ(files.size(), 1u);  // the old file was replaced
  const auto resumed = tensorboard::read_records(files[0]);
  const auto all = exported_scalars(dir, ws.dir().path() / "tb");
  const auto scalars = scalars_of(resumed, 3);  // file_version, session_log START, session start
  EXPECT_EQ(scalars, all);
  EXPECT_EQ(std::set<std::string>(scalars.begin(), scalars.end()).size(), scalars.size());  // each step once
  EXPECT_NE(resumed.back().find(tensorboard::kSessionEndTag), std::string::npos);
}

}  // namespace

TEST(LiveTensorBoard, OneProcessWritesEachEpochAsItTrainsAndAResumeKeepsEachStepOnce) { kill_and_resume(1, 0); }

TEST(LiveTensorBoard, RankZeroOfTwoProcessesWritesTheFileAndAResumeKeepsEachStepOnce) { kill_and_resume(2, 1); }

}  // namespace ddplab::testing
