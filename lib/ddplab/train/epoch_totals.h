// What one epoch of training adds up, and what the trainer builds from it: the epoch's record
// (rundir::EpochRecord, written by rank 0) and the position and partial metrics of a checkpoint
// (CheckpointState; the dropout RNG states and the parts' states are added by their owners). Pure functions of their
// arguments, so they can be tested without training.
#pragma once
#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ddplab/rundir/run_log.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/noise_scale.h"

namespace ddplab::train {

// The per-epoch accumulators of one process (its replica, or all simulated ones).
struct EpochTotals {
  at::Tensor loss_sum;       // float64 scalar on the device: summed training cross-entropy of its samples
  at::Tensor correct;        // int64 scalar on the device: its correct training predictions
  double grad_norm_sum = 0;  // over the epoch's steps: |reduced gradient|_2
  double comm_wait_s = 0;    // blocked on gradient all-reduces
  int64_t comm_bytes = 0;    // sent in gradient and parameter collectives (ring all-reduce count)
  double lr = 0;             // of the last step taken
};

// The epoch's metrics summed over all replicas (all-reduced).
struct EpochSums {
  double train_loss = 0, train_correct = 0, test_loss = 0, test_correct = 0;
  double val_loss = 0, val_correct = 0;  // with a validation split
};

// What an epoch's record needs besides its totals and sums.
struct EpochContext {
  int epoch = 0;            // 1-based
  int64_t global_step = 0;  // optimizer steps taken so far
  int64_t steps = 0;        // per epoch (of global_batch samples each)
  int64_t global_batch = 0;
  int64_t test_samples = 0;
  int64_t val_samples = 0;  // the validation split's; 0: none
  int replicas = 1;
  double epoch_s = 0;  // training time of the epoch
  double wall_s = 0;   // since the start of training
};

// The record of an epoch. Train metrics are per sample of the epoch's steps x global_batch,
// test metrics per test sample (validation metrics per validation sample, when there is a split),
// grad_norm per step. `drift`: local SGD / EASGD only. The noise-scale fields stay empty.
rundir::EpochRecord make_epoch_record(const EpochContext& context, const EpochTotals& totals, const EpochSums& sums,
                                      std::optional<double> drift);
// The gradient noise scale's fields of `rec`, when it has an estimate (else they stay empty).
void add_noise_scale(const GradNoiseScale& noise_scale, rundir::EpochRecord& rec);

// An epoch interrupted by a clean stop after `steps_done` of its steps.
struct PartialEpoch {
  int64_t steps_done = 0;
  double loss_sum = 0, correct = 0;  // the replicas' EpochTotals::loss_sum and correct, summed
  double elapsed_s = 0;              // of training in this epoch so far
};

// The checkpoint's position and metrics: after epoch `epoch` (0-based) ended, or, with `partial`,
// inside it (then it also holds the partial metrics: `partial`'s and the grad norm, comm wait and
// bytes of `totals`). `global_step`: steps taken so far; `wall_s`: training time so far. Records:
// one per finished epoch.
// What epoch `epoch` (0-based) starts from: zeros, or, in the epoch a checkpoint stopped inside,
// `resumed`'s partial totals (its summed training sums on the lead rank only, which reports them
// for all; lr left 0). Tensors on `device`.
EpochTotals epoch_start_totals(const CheckpointState& resumed, int epoch, bool lead, c10::Device device);

CheckpointState make_checkpoint_state(int epoch, int64_t global_step, double wall_s, const EpochTotals& totals,
                                      const std::optional<PartialEpoch>& partial);

}  // namespace ddplab::train
