#include "ddplab/train/early_stop.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ddplab::train {
namespace {

rundir::EpochRecord record(int epoch, double val_loss, double val_acc) {
  rundir::EpochRecord r;
  r.epoch = epoch;
  r.val_loss = val_loss;
  r.val_acc = val_acc;
  return r;
}

TEST(EarlyStop, LowerLossImprovesByMoreThanMinDeltaAndPatienceCountsEpochsSinceTheBest) {
  config::EarlyStopSpec spec;
  spec.patience = 2;
  spec.min_delta = 0.01;
  EarlyStop stop(spec);
  EXPECT_TRUE(stop.improved(record(1, 0.50, 0.8)));
  EXPECT_FALSE(stop.improved(record(2, 0.495, 0.9)));  // better, but by less than min_delta
  EXPECT_FALSE(stop.should_stop(2));
  EXPECT_TRUE(stop.improved(record(3, 0.48, 0.7)));
  EXPECT_EQ(stop.best_epoch(), 3);
  EXPECT_EQ(stop.best(), 0.48);
  EXPECT_FALSE(stop.improved(record(4, 0.60, 0.9)));
  EXPECT_FALSE(stop.should_stop(4));
  EXPECT_FALSE(stop.improved(record(5, 0.48, 0.9)));  // equal is not better
  EXPECT_TRUE(stop.should_stop(5));
}

// Was "for 1 epochs".
TEST(EarlyStop, TheNoteCountsEpochsInTheSingularToo) {
  config::EarlyStopSpec spec;
  spec.patience = 1;
  EarlyStop stop(spec);
  ASSERT_TRUE(stop.improved(record(1, 0.50, 0.8)));
  ASSERT_FALSE(stop.improved(record(2, 0.60, 0.8)));
  EXPECT_EQ(stop.note(2), "stopped early after epoch 2: val_loss has not improved on epoch 1's 0.5000 for 1 epoch");
  EXPECT_EQ(stop.note(3), "stopped early after epoch 3: val_loss has not improved on epoch 1's 0.5000 for 2 epochs");
}

TEST(EarlyStop, AccuracyIsMaximizedAndANanNeverImproves) {
  config::EarlyStopSpec spec;
  spec.metric = config::StopMetric::kValAcc;
  EarlyStop stop(spec);
  EXPECT_FALSE(stop.improved(record(1, 0.5, std::nan(""))));
  EXPECT_FALSE(stop.best_epoch().has_value());
  EXPECT_TRUE(stop.improved(record(2, 0.5, 0.80)));
  EXPECT_FALSE(stop.improved(record(3, 0.1, 0.79)));
  EXPECT_FALSE(stop.improved(record(4, 0.1, std::nan(""))));
  EXPECT_TRUE(stop.improved(record(5, 0.9, 0.81)));
  EXPECT_FALSE(stop.should_stop(100)) << "patience 0 never stops";
}

TEST(EarlyStop, ARestoredBestGoesOnAsIfNeverStopped) {
  config::EarlyStopSpec spec;
  spec.patience = 1;
  EarlyStop stop(spec);
  stop.restore(2, 0.3);
  EXPECT_FALSE(stop.should_stop(2));
  EXPECT_FALSE(stop.improved(record(3, 0.3, 0.5)));
  EXPECT_TRUE(stop.should_stop(3));
}

}  // namespace
}  // namespace ddplab::train
