#include "ddplab/train/epoch_totals.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddplab::train {
namespace {

EpochContext context() {
  EpochContext c;
  c.epoch = 2;
  c.global_step = 20;
  c.steps = 10;
  c.global_batch = 8;  // 80 training samples an epoch
  c.test_samples = 50;
  c.replicas = 2;
  c.epoch_s = 4;
  c.wall_s = 9;
  return c;
}

EpochTotals totals() {
  EpochTotals t;
  t.grad_norm_sum = 5;
  t.comm_wait_s = 0.25;
  t.comm_bytes = 1234;
  t.lr = 0.01;
  return t;
}

TEST(TrainerEpochRecord, MetricsArePerSampleAndPerStep) {
  const EpochSums sums{/*train_loss=*/40, /*train_correct=*/60, /*test_loss=*/25, /*test_correct=*/45};
  const auto rec = make_epoch_record(context(), totals(), sums, std::nullopt);
  EXPECT_EQ(rec.epoch, 2);
  EXPECT_EQ(rec.step, 20);
  EXPECT_EQ(rec.lr, 0.01);
  EXPECT_EQ(rec.train_loss, 0.5);
  EXPECT_EQ(rec.train_acc, 0.75);
  EXPECT_EQ(rec.test_loss, 0.5);
  EXPECT_EQ(rec.test_acc, 0.9);
  EXPECT_EQ(rec.grad_norm, 0.5);
  EXPECT_EQ(rec.epoch_s, 4);
  EXPECT_EQ(rec.wall_s, 9);
  EXPECT_EQ(rec.images_per_s, 20);
  EXPECT_EQ(rec.comm_wait_s, 0.25);
  EXPECT_EQ(rec.comm_bytes, 1234);
  EXPECT_EQ(rec.replicas, 2);
  EXPECT_EQ(rec.global_batch, 8);
  EXPECT_FALSE(rec.grad_noise_scale.has_value());
  EXPECT_FALSE(rec.gns_trace_ema.has_value());
  EXPECT_FALSE(rec.replica_drift.has_value());
}

TEST(TrainerEpochRecord, NoiseScaleAndDriftWhenGiven) {
  GradNoiseScale gns(/*b_small=*/4, /*b_big=*/8);
  const EpochSums sums{1, 1, 1, 1};
  auto none = make_epoch_record(context(), totals(), sums, 0.125);
  add_noise_scale(gns, none);
  EXPECT_FALSE(none.grad_noise_scale.has_value()) << "no estimate before the first update";
  EXPECT_EQ(none.replica_drift, 0.125);
  gns.update(torch::tensor(3.0), torch::tensor(2.0));
  auto rec = make_epoch_record(context(), totals(), sums, std::nullopt);
  add_noise_scale(gns, rec);
  ASSERT_TRUE(rec.gns_trace_ema.has_value());
  ASSERT_TRUE(rec.gns_grad_sq_ema.has_value());
  ASSERT_TRUE(rec.grad_noise_scale.has_value());
  EXPECT_EQ(*rec.gns_trace_ema, *gns.trace_ema());
  EXPECT_EQ(*rec.gns_grad_sq_ema, *gns.grad_sq_ema());
  EXPECT_EQ(*rec.grad_noise_scale, *gns.b_simple());
}

TEST(CheckpointState, AtAnEpochBoundaryHoldsOnlyThePosition) {
  const auto s = make_checkpoint_state(/*epoch=*/2, /*global_step=*/30, /*wall_s=*/7.5, totals(), std::nullopt);
  EXPECT_EQ(s.epochs_done, 3);
  EXPECT_EQ(s.records, 3);
  EXPECT_EQ(s.step_in_epoch, 0);
  EXPECT_EQ(s.global_step, 30);
  EXPECT_EQ(s.wall_s, 7.5);
  EXPECT_EQ(s.loss_sum, 0);
  EXPECT_EQ(s.grad_norm_sum, 0);
  EXPECT_EQ(s.comm_wait_s, 0);
  EXPECT_EQ(s.comm_bytes, 0);
  EXPECT_EQ(s.epoch_elapsed_s, 0);
}

TEST(CheckpointState, InsideAnEpochHoldsThePartialMetrics) {
  PartialEpoch partial;
  partial.steps_done = 4;
  partial.loss_sum = 12.5;
  partial.correct = 17;
  partial.elapsed_s = 1.5;
  const auto s = make_checkpoint_state(/*epoch=*/2, /*global_step=*/24, /*wall_s=*/7.5, totals(), partial);
  EXPECT_EQ(s.epochs_done, 2) << "epoch 3 (0-based 2) is not done";
  EXPECT_EQ(s.records, 2);
  EXPECT_EQ(s.step_in_epoch, 4);
  EXPECT_EQ(s.global_step, 24);
  EXPECT_EQ(s.wall_s, 7.5);
  EXPECT_EQ(s.loss_sum, 12.5);
  EXPECT_EQ(s.correct, 17);
  EXPECT_EQ(s.grad_norm_sum, 5);
  EXPECT_EQ(s.comm_wait_s, 0.25);
  EXPECT_EQ(s.comm_bytes, 1234);
  EXPECT_EQ(s.epoch_elapsed_s, 1.5);
}

}  // namespace
}  // namespace ddplab::train
