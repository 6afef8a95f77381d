// Which rank the launcher blames for a failed attempt. The statuses come from real child
// processes (a raised signal, an exit code), as waitpid hands them to the launcher.
#include "ddplab/launch/launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

namespace ddplab::launch {
namespace {

// The waitpid status of a child that raises `sig` (or, for sig 0, exits with `code`).
int status_of_child(int sig, int code = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    if (sig != 0) {
      std::signal(sig, SIG_DFL);
      std::raise(sig);
    }
    _exit(code);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return status;
}

TEST(Launcher, ASelfKilledRankIsBlamedWhenAPeersBrokenPipeWasReapedFirst) {
  // CI saw rank 0 die of SIGPIPE (writing to its dead peer) reaped before rank 1's own SIGKILL.
  std::vector<RankEnd> ends = {{status_of_child(SIGPIPE), false, 0}, {status_of_child(SIGKILL), false, 0}};
  EXPECT_EQ(root_cause_rank(ends, /*first_seen=*/0), 1);
}

TEST(Launcher, ASignalTheLauncherSentIsNeverTheCause) {
  std::vector<RankEnd> ends = {
      {status_of_child(SIGTERM), true, 0}, {status_of_child(SIGKILL), true, 0}, {status_of_child(0, 1), false, 500}};
  EXPECT_EQ(root_cause_rank(ends, /*first_seen=*/0), 2);
}

TEST(Launcher, ASignalNobodyHereSentBeatsAnEarlierErrorFile) {
  std::vector<RankEnd> ends = {{status_of_child(0, 1), false, 100}, {status_of_child(SIGSEGV), false, 0}};
  EXPECT_EQ(root_cause_rank(ends, /*first_seen=*/0), 1);
}

TEST(Launcher, TheEarliestErrorFileWinsOverTheOrderOfReaping) {
  std::vector<RankEnd> ends = {
      {status_of_child(0, 1), false, 300}, {status_of_child(0, 1), false, 100}, {status_of_child(0, 1), false, 200}};
  EXPECT_EQ(root_cause_rank(ends, /*first_seen=*/0), 1);
}

TEST(Launcher, WithoutSignalOrErrorFileTheFirstRankSeenFailingIsBlamed) {
  std::vector<RankEnd> ends = {{status_of_child(SIGPIPE), false, 0}, {status_of_child(0, 1), false, 0}};
  EXPECT_EQ(root_cause_rank(ends, /*first_seen=*/1), 1);
}

}  // namespace
}  // namespace ddplab::launch
