#include "ddplab/train/epoch_totals.h"

namespace ddplab::train {

rundir::EpochRecord make_epoch_record(const EpochContext& c, const EpochTotals& totals, const EpochSums& sums,
                                      std::optional<double> drift) {
  const double train_n = static_cast<double>(c.steps * c.global_batch);
  const double test_n = static_cast<double>(c.test_samples);
  rundir::EpochRecord rec;
  rec.epoch = c.epoch;
  rec.step = c.global_step;
  rec.lr = totals.lr;
  rec.train_loss = sums.train_loss / train_n;
  rec.train_acc = sums.train_correct / train_n;
  rec.test_loss = sums.test_loss / test_n;
  rec.test_acc = sums.test_correct / test_n;
  if (c.val_samples > 0) {
    rec.val_loss = sums.val_loss / static_cast<double>(c.val_samples);
    rec.val_acc = sums.val_correct / static_cast<double>(c.val_samples);
  }
  rec.grad_norm = totals.grad_norm_sum / c.steps;
  rec.epoch_s = c.epoch_s;
  rec.wall_s = c.wall_s;
  rec.images_per_s = train_n / c.epoch_s;
  rec.comm_wait_s = totals.comm_wait_s;
  rec.comm_bytes = totals.comm_bytes;
  rec.replica_drift = drift;
  rec.replicas = c.replicas;
  rec.global_batch = c.global_batch;
  return rec;
}

void add_noise_scale(const GradNoiseScale& noise_scale, rundir::EpochRecord& rec) {
  if (!noise_scale.available()) return;
  rec.gns_trace_ema = noise_scale.trace_ema();
  rec.gns_grad_sq_ema = noise_scale.grad_sq_ema();
  rec.grad_noise_scale = noise_scale.b_simple();
}

EpochTotals epoch_start_totals(const CheckpointState& resumed, int epoch, bool lead, c10::Device device) {
  const bool partial = epoch == resumed.epochs_done && resumed.step_in_epoch > 0;
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  EpochTotals totals;
  totals.loss_sum = torch::full({}, partial && lead ? resumed.loss_sum : 0.0, f64);
  totals.correct =
      torch::full({}, partial && lead ? static_cast<int64_t>(resumed.correct) : 0, f64.dtype(torch::kInt64));
  if (!partial) return totals;
  totals.grad_norm_sum = resumed.grad_norm_sum;
  totals.comm_wait_s = resumed.comm_wait_s;
  totals.comm_bytes = resumed.comm_bytes;
  return totals;
}

CheckpointState make_checkpoint_state(int epoch, int64_t global_step, double wall_s, const EpochTotals& totals,
                                      const std::optional<PartialEpoch>& partial) {
  CheckpointState state;
  state.epochs_done = partial ? epoch : epoch + 1;
  state.records = state.epochs_done;
  state.global_step = global_step;
  state.wall_s = wall_s;
  if (!partial) return state;
  state.step_in_epoch = partial->steps_done;
  // The partial train metrics are per rank: the checkpoint holds their sum; rank 0 alone restores it.
  state.loss_sum = partial->loss_sum;
  state.correct = partial->correct;
  state.grad_norm_sum = totals.grad_norm_sum;
  state.comm_wait_s = totals.comm_wait_s;
  state.comm_bytes = totals.comm_bytes;
  state.epoch_elapsed_s = partial->elapsed_s;
  return state;
}

}  // namespace ddplab::train
