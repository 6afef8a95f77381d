#include "ddplab/tensorboard/live.h"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddplab/rundir/layout.h"
#include "ddplab/tensorboard/events.h"
#include "ddplab/tensorboard/export.h"
#include "report/fake_run.h"
#include "tensorboard/event_file_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace ddplab;
using namespace ddplab::tensorboard;
using ddplab::testing::event_files;
using ddplab::testing::exported_scalars;
using ddplab::testing::FakeRun;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;
using ddplab::testing::write_run;

namespace {

constexpr double kStart = 1767225600;  // FakeRun's manifest start, 2026-01-01T00:00:00Z

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  return lines;
}

// Keeps the first `n` of `lines` in `file`, as a run that has written only so far.
void keep_lines(const fs::path& file, const std::vector<std::string>& lines, size_t n) {
  std::string text;
  for (size_t i = 0; i < n && i < lines.size(); ++i) text += lines[i];
  write_file(file, text);
}

// A run of 3 epochs with a step record in each; `dir` holds its first `epochs` epochs.
struct GrowingRun {
  explicit GrowingRun(const fs::path& root) {
    FakeRun r;
    r.status = "running";
    r.manifest_patch = {{"train_start", "2026-01-01T00:00:01.500Z"}};  // scalars count from it
    for (int e = 0; e < 3; ++e)
      r.steps.push_back({{"step", 50 + 100 * e},
                         {"epoch", 0.5 + e},
                         {"interval_steps", 50},
                         {"lr", 0.01},
                         {"train_loss", 2.0 - e},
                         {"train_acc", 0.3},
                         {"samples", 3200 + 6400 * e},
                         {"elapsed_s", 5.0 + 12 * e}});
    dir = write_run(root, r);
    epochs = lines_of(rundir::epochs_file(dir));
    steps = lines_of(rundir::steps_file(dir));
  }
  void hold(size_t n) const {
    keep_lines(rundir::epochs_file(dir), epochs, n);
    keep_lines(rundir::steps_file(dir), steps, n);
  }
  fs::path dir;
  std::vector<std::string> epochs, steps;
};

}  // namespace

TEST(TensorBoardLive, EachUpdateAppendsWhatTheExportWritesOfTheRecordsSoFar) {
  TempDir tmp;
  const GrowingRun run(tmp.path() / "runs");
  ASSERT_EQ(run.epochs.size(), 3u);
  run.hold(0);
  LiveEventFile live(run.dir, /*resumed=*/false);
  EXPECT_EQ(live.file().parent_path(), run.dir);
  auto records = read_records(live.file());
  ASSERT_EQ(records.size(), 2u);  // file_version, session start: no record yet
  EXPECT_EQ(records[1],
            session_start_event(kStart,
                                {{{"replicas.count", 1.0}, {"schedule.scale_rule", std::string("none")}, {"seed", 1.0}},
                                 "exp: replicas.count=1, schedule.scale_rule=none",
                                 kStart}));
  for (size_t n = 1; n <= 3; ++n) {
    run.hold(n);
    live.update();
    records = read_records(live.file());
    const std::vector<std::string> scalars(records.begin() + 2, records.end());
    EXPECT_EQ(scalars, exported_scalars(run.dir, tmp.path() / "tb")) << "after epoch " << n;
  }
  live.update();  // nothing new: nothing appended
  EXPECT_EQ(read_records(live.file()).size(), records.size());
  live.finish(SessionStatus::kSuccess);
  records = read_records(live.file());
  ASSERT_EQ(records.size(), 2 + exported_scalars(run.dir, tmp.path() / "tb").size() + 1);
  EXPECT_NE(records.back().find(kSessionEndTag), std::string::npos);
}

TEST(TensorBoardLive, AResumedRunsFileHoldsTheKeptRecordsOnceAndReplacesTheOldFile) {
  TempDir tmp;
  const GrowingRun run(tmp.path() / "runs");
  run.hold(2);
  const fs::path old_file = LiveEventFile(run.dir, /*resumed=*/false).file();
  run.hold(1);  // resume dropped the records after the checkpoint (RunLog::resume)
  LiveEventFile resumed(run.dir, /*resumed=*/true);
  EXPECT_NE(resumed.file(), old_file);
  EXPECT_EQ(event_files(run.dir), std::vector<fs::path>{resumed.file()});
  auto records = read_records(resumed.file());
  ASSERT_GE(records.size(), 3u);
  // A session_log START at step 0: its Event ends with the session_log field, all that is left of
  // an Event at wall time 0 and step 0 (proto3 leaves out zeros).
  const std::string start = session_log_start_event(0, 0);
  EXPECT_EQ(records[1].substr(records[1].size() - start.size()), start);
  EXPECT_EQ(std::vector<std::string>(records.begin() + 3, records.end()), exported_scalars(run.dir, tmp.path() / "tb"));
  run.hold(3);
  resumed.update();
  records = read_records(resumed.file());
  const std::vector<std::string> scalars(records.begin() + 3, records.end());
  EXPECT_EQ(scalars, exported_scalars(run.dir, tmp.path() / "tb"));
  EXPECT_EQ(std::set<std::string>(scalars.begin(), scalars.end()).size(), scalars.size());  // each step once
}
