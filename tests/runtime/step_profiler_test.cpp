#include "ddplab/runtime/step_profiler.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "test_util.h"

namespace ddplab::runtime {
namespace {

const c10::Device kCpu(c10::kCPU);

// Steps 0..steps-1, each one matrix product, traced by `profiler` where its window says.
void take_steps(StepProfiler& profiler, int64_t from, int64_t to) {
  const auto a = torch::ones({8, 8});
  for (int64_t step = from; step < to; ++step) {
    profiler.begin_step(step);
    (void)a.mm(a);
    profiler.end_step(step);
  }
}

int64_t count(const std::vector<std::string>& names, const std::string& name) {
  return std::count(names.begin(), names.end(), name);
}

TEST(StepProfiler, TracesTheWindowsStepsOnlyAndWritesTheFileAfterItsLastStep) {
  testing::TempDir dir;
  const auto file = dir.path() / "trace.pt.trace.json";
  StepProfiler profiler(/*first_step=*/3, /*steps=*/2, kCpu, file);
  take_steps(profiler, 0, 4);
  EXPECT_FALSE(std::filesystem::exists(file)) << "written after the window's last step, not before";
  take_steps(profiler, 4, 8);
  ASSERT_TRUE(std::filesystem::exists(file));
  const auto steps = testing::traced_steps(file);
  ASSERT_EQ(steps.size(), 2U);
  for (const int64_t step : {3, 4}) {
    ASSERT_EQ(steps.count(step), 1U) << "step " << step;
    EXPECT_EQ(count(steps.at(step), "aten::mm"), 1) << "the step's own operator, once";
  }
  EXPECT_EQ(profiler.finish(), std::nullopt) << "nothing left to write";
}

// finish()'s note after steps [from, to) of a profiler whose window is [first, first + steps).
std::optional<std::string> note_after(int64_t first, int64_t steps, int64_t from, int64_t to,
                                      const std::filesystem::path& file) {
  StepProfiler profiler(first, steps, kCpu, file);
  take_steps(profiler, from, to);
  return profiler.finish();
}

TEST(StepProfiler, ARunEndingInsideTheWindowWritesWhatItTracedAndSaysSo) {
  testing::TempDir dir;
  const auto file = dir.path() / "trace.pt.trace.json";
  const auto note = note_after(2, 10, 0, 5, file);
  ASSERT_TRUE(note.has_value());
  EXPECT_NE(note->find("3 steps traced in " + file.string()), std::string::npos) << *note;
  EXPECT_EQ(testing::traced_steps(file).size(), 3U);
}

TEST(StepProfiler, AWindowTheRunNeverReachesOrAlreadyPassedWritesNothing) {
  testing::TempDir dir;
  const auto file = dir.path() / "trace.pt.trace.json";
  const auto later = note_after(100, 5, 0, 5, file);
  ASSERT_TRUE(later.has_value());
  EXPECT_NE(later->find("no step in [100, 105)"), std::string::npos) << *later;
  const auto resumed_after = note_after(2, 3, 6, 9, file);  // a run resumed at step 6
  ASSERT_TRUE(resumed_after.has_value());
  EXPECT_NE(resumed_after->find("no step in [2, 5)"), std::string::npos) << *resumed_after;
  EXPECT_EQ(note_after(0, 0, 0, 3, file), std::nullopt) << "no window, nothing to say";
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(StepProfiler, AProfilerDestroyedInsideItsWindowLetsTheNextOneRecord) {
  testing::TempDir dir;
  {
    StepProfiler interrupted(0, 10, kCpu, dir.path() / "a.json");
    interrupted.begin_step(0);  // a step that threw: its range is still open
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a.json"));
  StepProfiler next(0, 1, kCpu, dir.path() / "b.json");
  take_steps(next, 0, 1);
  EXPECT_EQ(testing::traced_steps(dir.path() / "b.json").size(), 1U);
}

}  // namespace
}  // namespace ddplab::runtime
