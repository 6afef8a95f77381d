// Trainer: the state and the named pieces of train_replica (trainer.h), internal to train/.
//
// The constructor sets up, in this order (the RNG draws and the collectives depend on it): the
// data and transform; the model from the spec's seed (rank-dependent only under debug fault
// skip_broadcast), placed on its device; the process group and the broadcast of rank 0's
// parameters and buffers; the dropout seed; optimizer, GradSync and simulated replicas; the
// loader, ReplicaSync and run log; then, when resuming, the checkpoint. run() runs the epochs and
// saves the final model. Every rank calls the same collectives in the same order (c10d needs it):
// per step GradSync's all-reduces and ReplicaSync's averaging, a buffer broadcast before every
// forward and before evaluation; with log.every_steps, per interval the all-reduce of the epoch's
// training sums (after the step's gradient reduction, before ReplicaSync's); per epoch the metric all-reduce, then the
// consistency audit; per checkpoint the gather of the dropout RNG states (after the partial metrics' all-reduce of a
// clean stop).
#pragma once
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/optim/optimizer.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/loader.h"
#include "ddplab/data/transform.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_sync.h"
#include "ddplab/distributed/world.h"
#include "ddplab/models/models.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runtime/device.h"
#include "ddplab/runtime/host_load.h"
#include "ddplab/train/audits.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/early_stop.h"
#include "ddplab/train/epoch_totals.h"
#include "ddplab/train/lr_schedule.h"
#include "ddplab/train/noise_scale.h"
#include "ddplab/train/observer.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/simulated.h"
#include "ddplab/train/step_log.h"
#include "ddplab/train/trainer.h"
#include "ddplab/train/weight_ema.h"

namespace ddplab::train {

class Trainer {
 public:
  // `spec`, `world` and `options` must outlive the Trainer.
  Trainer(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  ReplicaResult run();

 private:
  using Clock = std::chrono::steady_clock;

  // Set-up.
  void load_data();
  void build_model();
  void place_on_device();
  void connect();
  void build_training();
  void build_loader();
  void resume();
  uint64_t dropout_seed(int replica) const;
  at::Tensor dropout_state();

  // The epoch loop.
  void run_epoch(int epoch);
  EpochTotals start_epoch(int epoch);
  void train_steps(int epoch, EpochTotals& totals);
  void stage_next(int64_t step);
  bool fault_now() const;
  void inject_fault();
  bool train_step(int epoch, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y, EpochTotals& totals);
  void compute_gradients(const at::Tensor& batch_x, const at::Tensor& batch_y, bool reduce, EpochTotals& totals);
  void accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals);
  std::pair<at::Tensor, at::Tensor> forward_backward(const at::Tensor& x, const at::Tensor& y);
  at::Tensor compute_loss(const at::Tensor& logits, const at::Tensor& y, int64_t reduction) const;
  void account_reduction(const at::Tensor& grad_sq, EpochTotals& totals);
  bool read_step(int epoch, EpochTotals& totals);
  void log_interval(int64_t step, const EpochTotals& totals);
  void read_interval();
  void close_interval_at_stop(int64_t step, double lr, double loss_sum, double correct, double wall_s);
  [[noreturn]] void stop_cleanly(int epoch, int64_t step, EpochTotals& totals);
  [[noreturn]] void diverge_agreed(int epoch);
  void broadcast_buffers();

  // The end of an epoch.
  struct SetSums {
    at::Tensor loss_sum, correct;  // over this process's shards of a set, on the device
  };
  struct Evaluation {
    SetSums test;
    std::optional<SetSums> validation;  // dataset.validation
    std::optional<double> drift;        // local SGD / EASGD
  };
  Evaluation evaluate_epoch_model();
  Evaluation evaluate();
  SetSums evaluate_set(const data::Dataset& set, int64_t samples);
  int64_t test_samples() const;
  EpochSums reduce_sums(int epoch, const EpochTotals& totals, const Evaluation& test);
  void audit_replicas(int epoch);
  rundir::EpochRecord epoch_record(int epoch, double epoch_s, const EpochTotals& totals, const EpochSums& sums,
                                   std::optional<double> drift) const;
  void check_not_blown_up(const rundir::EpochRecord& rec) const;
  void select_epoch(const rundir::EpochRecord& rec);
  void save_best();
  void stopped_early(int epochs_done);
  void maybe_checkpoint(int epoch, const EpochTotals& totals);
  void write_checkpoint(CheckpointState state);
  bool replicas_differ() const;
  std::vector<at::Tensor> gather_replica_states();
  void restore_final_params();
  void save_model();

  // Tells the observer where training is (StepProgress, observer.h).
  void report_step(int epoch, int64_t step, const EpochTotals& totals);

  double seconds_since(Clock::time_point t) const;
  // Rank 0 writes the run directory and reports epochs.
  bool lead() const { return rank_ == 0; }
  // N replicas in this one process (simulated.h), else one per process.
  bool simulated() const { return spec_.replicas.mode == config::ReplicaMode::kSimulated; }
  int replicas() const { return simulated() ? spec_.replicas.count : size_; }
  bool bf16() const { return spec_.precision == config::Precision::kBf16; }

  const config::ExperimentSpec& spec_;
  const distributed::World& world_;
  const ReplicaOptions& options_;
  const int rank_, size_;

  data::DatasetPair loaded_;  // when options_.data is null
  const data::DatasetPair* data_ = nullptr;
  std::shared_ptr<const data::Transform> transform_;
  std::shared_ptr<models::Model> model_;
  torch::Device device_{torch::kCPU};
  std::shared_ptr<distributed::Comm> comm_;
  std::vector<at::Tensor> buffers_;
  NamedTensors named_;
  std::vector<at::Tensor> params_;

  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  distributed::GradSyncOptions sync_options_;
  std::optional<distributed::GradSync> sync_;
  std::optional<SimulatedReplicas> sim_;
  GradNoiseScale noise_scale_;
  std::optional<data::TrainLoader> loader_;
  std::optional<runtime::BatchMover> mover_;
  int64_t steps_ = 0;  // per epoch
  std::optional<ReplicaSync> replica_sync_;
  std::optional<WeightEma> weight_ema_;  // model.ema_decay > 0
  LrSchedule schedule_;
  std::optional<rundir::RunLog> run_;        // only rank 0 writes the run directory
  std::shared_ptr<TrainObserver> observer_;  // options_.observer, else the console (console.h)
  std::vector<int> local_replicas_;          // the replicas this process computes (and whose test shards it evaluates)
  at::Generator dropout_generator_;
  std::filesystem::path checkpoint_file_;
  CheckpointState resumed_;
  bool faults_armed_ = false;
  AuditTrail audits_;     // debug.audits: a failure stops the run, or is kept for the epoch's record
  EarlyStop early_stop_;  // the best epoch on validation (best.pt) and early_stop.patience

  ReplicaResult result_;
  int64_t global_step_ = 0;
  bool audit_pending_ = false;             // local SGD: check the replicas at their next agreement
  std::vector<at::Tensor> final_params_;   // local SGD / EASGD / weight EMA: what the last epoch evaluated
  std::vector<at::Tensor> final_buffers_;  // weight EMA: the BatchNorm statistics the last epoch evaluated with
  Clock::time_point train_start_;

  // What lives for one epoch; start_epoch makes it.
  struct Unread {
    int64_t step = 0;  // global step
    double lr = 0;
    bool local = false;  // the pushed gradient norm is this replica's own (local SGD / EASGD, N > 1)
  };
  struct EpochState {
    explicit EpochState(c10::Device device) : readback(device), step_readback(device) {}
    int64_t first_step = 0;            // a resumed epoch starts at the checkpoint's step
    std::vector<at::Tensor> snapshot;  // the parameters at its start, for the update audit
    Clock::time_point start;           // a resumed epoch's start lies before the stop
    runtime::HostSample host_start;    // the host's load counters when this process began the epoch
    // Each step's gradient norm and stop flag, read on the host one step late (on CUDA the host
    // then never waits for the step it just queued); the epoch's last step is read at once.
    runtime::HostReadback readback;
    std::deque<Unread> unread;            // of each value pushed
    runtime::HostReadback step_readback;  // the training sums of a closed interval (log.every_steps)
  };
  std::optional<EpochState> this_epoch_;
  // Local SGD / EASGD: the first NaN or Inf local gradient norm, which only this rank saw; every
  // rank stops at the next agreement (an averaging point or the epoch's end) instead of this one
  // alone (its peers would then fail on a closed connection).
  std::optional<Diverged> local_divergence_;
  bool fault_stop_ = false;          // debug fault stop fired: asked at every agreement point until one comes
  std::optional<StepLog> step_log_;  // log.every_steps (rank 0 keeps the records)
};

}  // namespace ddplab::train
