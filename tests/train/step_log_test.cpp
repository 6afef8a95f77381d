#include "ddplab/train/step_log.h"

#include <gtest/gtest.h>

namespace ddplab::train {
namespace {

TEST(StepLog, IntervalsCloseEveryNStepsOfAnEpochAndAtItsLastStep) {
  StepLog log(3, 8, 16);
  std::vector<int64_t> closing;
  for (int64_t step = 0; step < 8; ++step)
    if (log.closes_interval(step)) closing.push_back(step);
  EXPECT_EQ(closing, (std::vector<int64_t>{2, 5, 7}));
  StepLog off(0, 8, 16);
  EXPECT_FALSE(off.enabled());
  for (int64_t step = 0; step < 8; ++step) EXPECT_FALSE(off.closes_interval(step));
}

// Epoch 2 (0-based 1) of 8 steps of 16 samples: cumulative sums in, per-interval means out.
TEST(StepLog, RecordsHoldTheIntervalsMeansFromTheEpochsCumulativeSums) {
  StepLog log(3, 8, 16);
  log.start_epoch(1, 0, 0, 0);
  log.close(2, 11, 0.1, 5.0);
  log.close(5, 14, 0.05, 6.0);
  EXPECT_EQ(log.unread(), 2u);
  log.read(48 * 2.0, 24);            // steps 0-2: 48 samples, mean loss 2, accuracy 0.5
  log.read(48 * 2.0 + 48, 24 + 36);  // steps 3-5: mean loss 1, accuracy 0.75
  log.close(7, 16, 0.01, 7.0);
  log.read(96 + 48 + 32 * 0.5, 60 + 32);  // steps 6-7: 32 samples, loss 0.5, accuracy 1
  const auto records = log.take();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].step, 11);
  EXPECT_DOUBLE_EQ(records[0].epoch, 1 + 3.0 / 8);
  EXPECT_EQ(records[0].interval_steps, 3);
  EXPECT_DOUBLE_EQ(records[0].lr, 0.1);
  EXPECT_DOUBLE_EQ(records[0].train_loss, 2.0);
  EXPECT_DOUBLE_EQ(records[0].train_acc, 0.5);
  EXPECT_EQ(records[0].samples, 11 * 16);
  EXPECT_DOUBLE_EQ(records[0].elapsed_s, 5.0);
  EXPECT_DOUBLE_EQ(records[1].train_loss, 1.0);
  EXPECT_DOUBLE_EQ(records[1].train_acc, 0.75);
  EXPECT_EQ(records[2].interval_steps, 2) << "the epoch's last, shorter interval";
  EXPECT_DOUBLE_EQ(records[2].epoch, 2.0);
  EXPECT_DOUBLE_EQ(records[2].train_loss, 0.5);
  EXPECT_DOUBLE_EQ(records[2].train_acc, 1.0);
  EXPECT_TRUE(log.take().empty()) << "take hands each record out once";
}

TEST(StepLog, AnEvaluationPointGoesIntoTheRecordOfItsInterval) {
  StepLog log(2, 4, 16);
  log.start_epoch(0, 0, 0, 0);
  log.close(1, 2, 0.1, 3.0, EvalPoint{0.5, 0.875, 0.25});
  log.close(3, 4, 0.1, 4.0);
  log.read(32, 16);
  log.read(64, 32);
  const auto records = log.take();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].eval_loss, 0.5);
  EXPECT_EQ(records[0].eval_acc, 0.875);
  EXPECT_DOUBLE_EQ(records[0].elapsed_s, 3.0) << "the point's seconds are the caller's to count";
  EXPECT_FALSE(records[1].eval_acc.has_value());
}

// Resumed after a stop at step 4 of the epoch (5 steps done, their sums restored): the first
// interval covers steps 5 only, from the restored sums on.
TEST(StepLog, AnEpochResumedInsideStartsItsFirstIntervalAtTheCheckpoint) {
  StepLog log(3, 8, 16);
  log.start_epoch(0, 5, 80 * 1.5, 40);
  EXPECT_TRUE(log.closes_interval(5));
  log.close(5, 6, 0.1, 1.0);
  log.read(80 * 1.5 + 16 * 3.0, 40 + 4);
  const auto records = log.take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].interval_steps, 1);
  EXPECT_DOUBLE_EQ(records[0].train_loss, 3.0);
  EXPECT_DOUBLE_EQ(records[0].train_acc, 0.25);
}

}  // namespace
}  // namespace ddplab::train
