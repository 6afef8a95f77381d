// `ddplab run --tee` (launch/rank_output.h): real processes writing to pipes, and a real run of
// two ranks, whose every line reaches the console once, whole and prefixed, and its log file.
#include "ddplab/launch/rank_output.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddplab/launch/process.h"
#include "integration/integration_util.h"
#include "test_util.h"

namespace ddplab::launch {
namespace {

namespace fs = std::filesystem;
using testing::read_file;

// The lines of `text` that start with `prefix`, without it, and how often each comes.
std::map<std::string, int> lines_after(const std::string& text, const std::string& prefix) {
  std::map<std::string, int> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) ++lines[line.substr(prefix.size())];
  return lines;
}

Child spawn_shell(const std::string& script) {
  SpawnOptions s;
  s.argv = {"/bin/sh", "-c", script};
  s.out = s.err = Output::kPipe;
  return spawn(s);
}

// Two children write lines to stdout and stderr in small pieces, interleaved in time, one ends
// without a newline, one writes a line longer than kLongLine.
TEST(RankOutput, EveryLineOfEveryStreamReachesTheConsoleWholeOncePrefixedAndTheLog) {
  testing::TempDir tmp;
  const std::string long_line(RankOutput::kLongLine + 10, 'x');
  const Child a = spawn_shell(
      "for i in 1 2 3 4 5; do printf 'out %s ' $i; sleep 0.01; printf 'of a\\n'; printf 'err %s\\n' $i >&2; done; "
      "printf 'no newline'");
  const Child b = spawn_shell("for i in 1 2 3 4 5; do printf 'line %s of b\\n' $i; sleep 0.01; done; printf '" +
                              long_line + "\\n'");
  ::testing::internal::CaptureStdout();
  {
    RankOutput output;
    output.add(0, a.out_fd, a.err_fd, tmp.path() / "rank-0.log");
    output.add(1, b.out_fd, b.err_fd, tmp.path() / "rank-1.log");
    std::optional<int> a_end, b_end;
    while (!a_end || !b_end) {  // read as the launcher does while its ranks run: a full pipe blocks them
      output.pump(20);
      if (!a_end) a_end = try_wait(a.pid);
      if (!b_end) b_end = try_wait(b.pid);
    }
    output.drain(5000);
  }
  const std::string console = ::testing::internal::GetCapturedStdout();
  std::map<std::string, int> a_lines{{"no newline", 1}};
  for (int i = 1; i <= 5; ++i) {
    a_lines[fmt::format("out {} of a", i)] = 1;
    a_lines[fmt::format("err {}", i)] = 1;
  }
  EXPECT_EQ(lines_after(console, "[rank 0] "), a_lines) << console;
  EXPECT_EQ(lines_after(read_file(tmp.path() / "rank-0.log"), ""), a_lines);
  std::map<std::string, int> b_lines{{long_line.substr(0, RankOutput::kLongLine), 1}, {"xxxxxxxxxx", 1}};
  for (int i = 1; i <= 5; ++i) b_lines[fmt::format("line {} of b", i)] = 1;
  EXPECT_EQ(lines_after(console, "[rank 1] "), b_lines);
  EXPECT_EQ(lines_after(read_file(tmp.path() / "rank-1.log"), ""), b_lines);
  // Nothing but whole prefixed lines.
  EXPECT_EQ(lines_after(console, "").size(), a_lines.size() + b_lines.size());
}

// `ddplab run --tee` of 2 real ranks printing progress lines: each line of each rank's log is on
// the console once with its prefix, and the console holds no other line of a rank.
TEST(RankOutput, TeeShowsEveryLineOfTwoRealRanksOncePrefixed) {
  testing::Workspace ws;
  auto spec = ws.base_spec("tee");
  spec["epochs"] = 1;
  spec["replicas"]["count"] = 2;
  spec["log"] = {{"progress_s", 1e-6}};
  const auto r = testing::run_ddplab("run " + ws.write_spec(spec) + " --tee");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path dir = ws.out() / "tee" / "seed=3";
  for (int rank = 0; rank < 2; ++rank) {
    const auto log = lines_after(read_file(dir / fmt::format("rank-{}.log", rank)), "");
    const std::string last_step = fmt::format("rank {}: epoch 1/1  step 8/8  ", rank);
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [&](const auto& line) {
      return line.first.rfind(last_step, 0) == 0;
    })) << read_file(dir / fmt::format("rank-{}.log", rank));
    EXPECT_EQ(lines_after(r.output, fmt::format("[rank {}] ", rank)), log) << r.output;
  }
}

// Without --tee a failed rank's error still reaches the console with its prefix: the end of its
// log, each line prefixed.
TEST(RankOutput, WithoutTeeAFailedRanksLastLinesArePrefixed) {
  testing::Workspace ws;
  auto spec = ws.base_spec("fails");
  spec["epochs"] = 1;
  spec["replicas"]["count"] = 2;
  spec["debug"] = {{"fault", "throw"}, {"rank", 1}, {"step", 3}};
  const auto r = testing::run_ddplab("run " + ws.write_spec(spec));
  ASSERT_NE(r.exit_code, 0) << r.output;
  const auto log = lines_after(read_file(ws.out() / "fails" / "seed=3" / "rank-1.log"), "");
  const auto shown = lines_after(r.output, "[rank 1] ");
  ASSERT_FALSE(shown.empty()) << r.output;
  for (const auto& [line, count] : shown) EXPECT_EQ(log.count(line), 1u) << line;
  EXPECT_TRUE(std::any_of(shown.begin(), shown.end(), [](const auto& l) {
    return l.first.find("rank 1") != std::string::npos;
  })) << r.output;
  EXPECT_TRUE(lines_after(r.output, "[rank 0] ").empty()) << r.output;
}

}  // namespace
}  // namespace ddplab::launch
