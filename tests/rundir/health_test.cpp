#include "ddplab/rundir/health.h"

#include <gtest/gtest.h>

namespace ddplab::rundir {
namespace {

EpochRecord at(int epoch, double train_loss, double test_acc) {
  EpochRecord r;
  r.epoch = epoch;
  r.lr = 0.2;
  r.train_loss = train_loss;
  r.test_acc = test_acc;
  return r;
}

// The newcomer's batch-256 run: the linear rule took the lr to 0.2, epoch 1's training loss was
// 42.7, and the run ended at 10.15%.
TEST(RunHealth, ALossExplosionThenChanceIsDivergedNamingTheEpochAndTheLoss) {
  const std::vector<EpochRecord> records = {at(1, 42.7, 0.1), at(2, 2.3026, 0.1015), at(3, 2.3026, 0.1015)};
  ASSERT_EQ(loss_explosion(records, 10), &records[0]);
  const auto ending = failed_ending(records, 10);
  ASSERT_TRUE(ending);
  EXPECT_EQ(ending->status, RunStatus::kDiverged);
  EXPECT_EQ(ending->epoch, 1);
  EXPECT_EQ(ending->message,
            "diverged: the training loss exploded to 42.7 in epoch 1 (over 10 x ln 10 = 23.03; lr 0.2), then the run "
            "sat at chance: test accuracy 10.15%");
}

TEST(RunHealth, ChanceWithoutAnExplosionIsCollapsed) {
  const auto ending = failed_ending({at(1, 2.31, 0.1), at(2, 2.3026, 0.1015)}, 10);
  ASSERT_TRUE(ending);
  EXPECT_EQ(ending->status, RunStatus::kCollapsed);
  EXPECT_EQ(ending->message,
            "collapsed to chance: test accuracy 10.15% (chance 10.00%), final training loss 2.3026 (ln 10 = 2.3026)");
}

TEST(RunHealth, ARunThatLearntIsNoFailureEvenAfterABadEpoch) {
  EXPECT_FALSE(failed_ending({at(1, 0.6, 0.8), at(2, 0.4, 0.86)}, 10));
  EXPECT_FALSE(failed_ending({at(1, 42.7, 0.1), at(2, 0.5, 0.8)}, 10)) << "it recovered";
  EXPECT_FALSE(failed_ending({}, 10));
  EXPECT_FALSE(loss_explosion({at(1, 23.0, 0.5)}, 10)) << "10 x ln 10 = 23.03";
  EXPECT_TRUE(loss_explosion({at(1, 23.1, 0.5)}, 10));
  EXPECT_FALSE(failed_ending({at(1, 1.0, 0.05)}, 100)) << "5% is above chance for 100 classes";
}

}  // namespace
}  // namespace ddplab::rundir
