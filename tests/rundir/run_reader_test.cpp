// rundir/run_reader.h: the one rule every reader of epochs.jsonl and steps.jsonl follows.
#include "ddplab/rundir/run_reader.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "test_util.h"

namespace ddplab::rundir {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

std::string epoch_line(int epoch, double test_acc) {
  EpochRecord r;
  r.epoch = epoch;
  r.step = 10 * epoch;
  r.test_acc = test_acc;
  return r.to_json().dump() + "\n";
}

std::string step_line(int64_t step, double train_loss) {
  StepRecord r;
  r.step = step;
  r.train_loss = train_loss;
  return r.to_json().dump() + "\n";
}

std::vector<int> epochs_of(const std::vector<EpochRecord>& records) {
  std::vector<int> out;
  for (const auto& r : records) out.push_back(r.epoch);
  return out;
}

TEST(RunReader, ALaterRecordForAnEpochReplacesTheEarlierOneAsAResumeWritesIt) {
  TempDir tmp;
  write_file(epochs_file(tmp.path()),
             epoch_line(1, 0.5) + epoch_line(2, 0.6) + epoch_line(2, 0.7) + epoch_line(3, 0.8) + epoch_line(1, 0.55));
  std::vector<std::string> notes;
  const auto records = read_epoch_records(tmp.path(), notes);
  EXPECT_EQ(epochs_of(records), (std::vector<int>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(records[0].test_acc, 0.55);
  EXPECT_DOUBLE_EQ(records[1].test_acc, 0.7);
  EXPECT_TRUE(notes.empty());
}

TEST(RunReader, ATornLastLineIsSkippedWithANoteNamingFileAndLine) {
  TempDir tmp;
  write_file(epochs_file(tmp.path()), epoch_line(1, 0.5) + epoch_line(2, 0.6) + "{\"epoch\": 3, \"te");
  std::vector<std::string> notes;
  EXPECT_EQ(epochs_of(read_epoch_records(tmp.path(), notes)), (std::vector<int>{1, 2}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], epochs_file(tmp.path()).string() + ":3: skipped corrupt record (not valid JSON)");
}

// Skipped too, not an error: a report of many epochs is not lost to one line; the records around it count.
TEST(RunReader, ACorruptLineInTheMiddleIsSkippedWithANoteNamingFileLineAndField) {
  TempDir tmp;
  write_file(epochs_file(tmp.path()), epoch_line(1, 0.5) + "{\"epoch\": 2, \"lr\": \"fast\"}\n" + epoch_line(3, 0.8));
  std::vector<std::string> notes;
  EXPECT_EQ(epochs_of(read_epoch_records(tmp.path(), notes)), (std::vector<int>{1, 3}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind(epochs_file(tmp.path()).string() + ":2: skipped corrupt record (", 0), 0u) << notes[0];
}

TEST(RunReader, BlankLinesHoldNoRecordAndAMissingFileHasNone) {
  TempDir tmp;
  std::vector<std::string> notes;
  EXPECT_TRUE(read_epoch_records(tmp.path(), notes).empty());
  EXPECT_TRUE(read_step_records(tmp.path(), notes).empty());
  write_file(epochs_file(tmp.path()), "\n" + epoch_line(1, 0.5) + "  \n\n" + epoch_line(2, 0.6));
  EXPECT_EQ(epochs_of(read_epoch_records(tmp.path(), notes)), (std::vector<int>{1, 2}));
  EXPECT_TRUE(notes.empty());
}

TEST(RunReader, StepRecordsFollowTheSameRuleByStep) {
  TempDir tmp;
  write_file(steps_file(tmp.path()),
             step_line(20, 1.0) + step_line(10, 2.0) + "oops\n" + step_line(20, 0.9) + "{\"step\": 3");
  std::vector<std::string> notes;
  const auto steps = read_step_records(tmp.path(), notes);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 10);
  EXPECT_DOUBLE_EQ(steps[1].train_loss, 0.9);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], steps_file(tmp.path()).string() + ":3: skipped corrupt step record (not valid JSON)");
  EXPECT_EQ(notes[1], steps_file(tmp.path()).string() + ":5: skipped corrupt step record (not valid JSON)");
}

TEST(RunReader, ARunIsReadOnceWithItsManifestSpecAndRecords) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "seed=1";
  fs::create_directories(dir);
  write_file(manifest_file(dir), R"({"run_id": "seed=1", "status": "done", "experiment": "exp", "start": "x"})");
  write_file(spec_file(dir), R"({"name": "quick", "seed": 1})");
  write_file(epochs_file(dir), epoch_line(1, 0.5));
  std::vector<std::string> notes;
  const RunData run = read_run(dir, notes);
  EXPECT_EQ(run.run_id, "seed=1");
  EXPECT_EQ(run.status, RunStatus::kDone);
  EXPECT_EQ(run.experiment, "quick") << "the spec's name before the manifest's";
  EXPECT_EQ(run.manifest.value("start", ""), "x");
  EXPECT_EQ(run.epochs.size(), 1u);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(find_run_dirs({tmp.path()}), std::vector<fs::path>{dir});
}

TEST(RunReader, AManifestThatIsNotOneIsAnErrorNamingItAndAMissingSpecANote) {
  TempDir tmp;
  write_file(manifest_file(tmp.path()), "[1]");
  std::vector<std::string> notes;
  try {
    read_run(tmp.path(), notes);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(manifest_file(tmp.path()).string() + ": ", 0), 0u) << e.what();
  }
  write_file(manifest_file(tmp.path()), R"({"status": "running"})");
  const RunData run = read_run(tmp.path(), notes);
  EXPECT_TRUE(run.spec.is_null());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], spec_file(tmp.path()).string() + ": missing; grouped alone");
}

}  // namespace
}  // namespace ddplab::rundir
