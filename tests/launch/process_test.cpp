// The process toolkit with real children: /bin/sh scripts as the programs, their exit statuses as
// waitpid hands them back.
#include "ddplab/launch/process.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace ddplab::launch {
namespace {

namespace fs = std::filesystem;

SpawnOptions shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  return o;
}

TEST(Process, AChildKilledBySignalNMapsTo128PlusN) {
  const Child child = spawn(shell("kill -KILL $$"));
  const int status = wait_for(child.pid);
  EXPECT_EQ(exit_code_of(status), 128 + SIGKILL);
  EXPECT_EQ(describe_status(status), "killed by signal 9 (Killed)");
}

TEST(Process, AChildsOwnExitCodeIsKept) {
  const int status = wait_for(spawn(shell("exit 7")).pid);
  EXPECT_EQ(exit_code_of(status), 7);
  EXPECT_EQ(describe_status(status), "exited with code 7");
}

TEST(Process, OutputLandsInTheFileAndBothStreamsShareIt) {
  const testing::TempDir tmp;
  const fs::path dir = tmp.path();
  SpawnOptions o = shell("echo out; echo err >&2");
  o.out = o.err = Output::kFile;
  o.out_file = o.err_file = dir / "log";
  EXPECT_EQ(exit_code_of(wait_for(spawn(o).pid)), 0);
  EXPECT_EQ(testing::read_file(dir / "log"), "out\nerr\n");

  o.out = o.err = Output::kAppend;  // a second run appends instead of truncating
  EXPECT_EQ(exit_code_of(wait_for(spawn(o).pid)), 0);
  EXPECT_EQ(testing::read_file(dir / "log"), "out\nerr\nout\nerr\n");
}

TEST(Process, TheEnvironmentIsExactlyTheOneGiven) {
  const testing::TempDir tmp;
  const fs::path dir = tmp.path();
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"[$DDPLAB_PROCESS_TEST][$HOME]\""};
  o.env = std::vector<std::string>{"DDPLAB_PROCESS_TEST=yes"};
  o.out = Output::kFile;
  o.out_file = dir / "out";
  wait_for(spawn(o).pid);
  EXPECT_EQ(testing::read_file(dir / "out"), "[yes][]\n");
}

TEST(Process, RunProgramCapturesBothStreamsAndTheCode) {
  const ProgramResult r = run_program({"sh", "-c", "echo to-out; echo to-err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");
}

TEST(Process, AProgramNotOnPathIsAnErrorNamingIt) {
  const std::string message = testing::error_of([] { run_program({"ddplab-no-such-program"}); });
  EXPECT_NE(message.find("ddplab-no-such-program"), std::string::npos) << message;
}

TEST(Process, TryWaitDoesNotBlockOnARunningChild) {
  const Child child = spawn(shell("sleep 30"));
  EXPECT_FALSE(try_wait(child.pid).has_value());
  ::kill(child.pid, SIGTERM);
  EXPECT_EQ(exit_code_of(wait_for(child.pid)), 128 + SIGTERM);
}

// A middle process spawns a shell with parent_death_signal SIGKILL, waits until it runs (its
// "ready" line), and exits; this process is the subreaper, so the orphan is reparented here and
// its end can be read.
TEST(Process, TheParentDyingKillsTheChild) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  std::array<int, 2> p{};
  ASSERT_EQ(::pipe(p.data()), 0);
  const pid_t middle = ::fork();
  if (middle == 0) {
    try {
      SpawnOptions o = shell("echo ready; exec sleep 30");
      o.out = Output::kPipe;
      o.parent_death_signal = SIGKILL;
      const Child child = spawn(o);
      char c = 0;
      if (::read(child.out_fd, &c, 1) != 1) ::_exit(2);
      if (::write(p[1], &child.pid, sizeof child.pid) != static_cast<ssize_t>(sizeof child.pid)) ::_exit(3);
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  pid_t child = -1;
  ASSERT_EQ(::read(p[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(p[0]);
  const int middle_status = wait_for(middle);
  ASSERT_EQ(exit_code_of(middle_status), 0) << "the middle process " << describe_status(middle_status);
  const auto start = std::chrono::steady_clock::now();
  std::optional<int> status;
  while (!status && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    status = try_wait(child);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_TRUE(status.has_value()) << "the child outlived its parent";
  EXPECT_EQ(exit_code_of(*status), 128 + SIGKILL) << describe_status(*status);
}

}  // namespace
}  // namespace ddplab::launch
