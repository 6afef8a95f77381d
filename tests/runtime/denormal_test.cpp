#include "ddplab/runtime/denormal.h"

#include <thread>

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace ddplab::runtime {
namespace {

bool started_thread_flushes() {
  bool flushes = false;
  std::thread([&flushes] { flushes = FlushDenormalGuard::flushing(); }).join();
  return flushes;
}

// The pool is started before the guard (IntraOpThreads does), so its threads exist already and
// take nothing from the calling thread. The control shows that setting the calling thread alone
// leaves part of a parallel op unflushed: the op reaches another thread of the pool.
TEST(FlushDenormal, FlushesOnTheCallerItsPoolAndThreadsStartedLaterThenPutsThemBack) {
  const testing::IntraOpThreads two(2);
  ASSERT_FALSE(FlushDenormalGuard::flushing());
  ASSERT_EQ(testing::share_of_denormals_kept(), 1.0);
  at::globalContext().setFlushDenormal(true);
  const double caller_only = testing::share_of_denormals_kept();
  at::globalContext().setFlushDenormal(false);
  ASSERT_GT(caller_only, 0.0) << "control: the calling thread alone flushed the whole op";
  ASSERT_LT(caller_only, 1.0) << "control: the calling thread computed none of the op";
  {
    const FlushDenormalGuard flush(true);
    EXPECT_TRUE(FlushDenormalGuard::flushing());
    EXPECT_EQ(testing::share_of_denormals_kept(), 0.0);
    EXPECT_TRUE(started_thread_flushes());
  }
  EXPECT_FALSE(FlushDenormalGuard::flushing());
  EXPECT_EQ(testing::share_of_denormals_kept(), 1.0);
  EXPECT_FALSE(started_thread_flushes());
}

// The worker sets them before its process group, the Trainer again for its pool: the inner guard's
// end must not clear what the outer one set.
TEST(FlushDenormal, AnInnerGuardLeavesTheOuterOnesBitsAtItsEnd) {
  const testing::IntraOpThreads two(2);
  {
    const FlushDenormalGuard outer(true);
    {
      const FlushDenormalGuard inner(true);
    }
    EXPECT_TRUE(FlushDenormalGuard::flushing());
    EXPECT_EQ(testing::share_of_denormals_kept(), 0.0);
  }
  EXPECT_FALSE(FlushDenormalGuard::flushing());
  EXPECT_EQ(testing::share_of_denormals_kept(), 1.0);
}

TEST(FlushDenormal, OffChangesNothing) {
  const testing::IntraOpThreads two(2);
  const FlushDenormalGuard keep(false);
  EXPECT_FALSE(FlushDenormalGuard::flushing());
  EXPECT_EQ(testing::share_of_denormals_kept(), 1.0);
}

}  // namespace
}  // namespace ddplab::runtime
