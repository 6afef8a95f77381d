// The one SIGINT/SIGTERM handler, with real signals raised in this process.
#include "ddplab/base/stop_signals.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <gtest/gtest.h>

namespace ddplab {
namespace {

TEST(StopSignals, RecordsTheLastSignalAndHowManyAndRestoresTheOldHandler) {
  {
    const StopSignals stop(StopSignals::Second::kRecord);
    EXPECT_EQ(StopSignals::last(), 0);
    std::raise(SIGTERM);
    std::raise(SIGINT);
    EXPECT_EQ(StopSignals::last(), SIGINT);
    EXPECT_EQ(StopSignals::count(), 2);
  }
  struct sigaction now{};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// Was "interrupted by Interrupt" (strsignal's name of SIGINT).
TEST(StopSignals, StopSignalsAreNamedAsAShellUserNamesThem) {
  EXPECT_EQ(signal_name(SIGINT), "SIGINT (Ctrl-C)");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGKILL), strsignal(SIGKILL));
}

TEST(StopSignals, ANewScopeStartsCountingAgain) {
  {
    const StopSignals first(StopSignals::Second::kRecord);
    std::raise(SIGTERM);
  }
  const StopSignals second(StopSignals::Second::kRecord);
  EXPECT_EQ(StopSignals::last(), 0);
  EXPECT_EQ(StopSignals::count(), 0);
}

// In a child: the first SIGTERM is recorded, the second takes the default action and kills it.
TEST(StopSignals, WithDefaultActionOnSecondTheSecondSignalKills) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const StopSignals stop(StopSignals::Second::kDefaultAction);
    std::raise(SIGTERM);
    if (StopSignals::last() != SIGTERM) ::_exit(10);
    std::raise(SIGTERM);
    ::_exit(11);  // not reached when the second signal killed it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

}  // namespace
}  // namespace ddplab
