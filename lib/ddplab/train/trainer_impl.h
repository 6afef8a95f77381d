// Trainer: the state and the named pieces of train_replica (trainer.h), internal to train/. Its
// parts, each its own file: the Network (network.h; the set-up check_setup shares), the
// LocalReplicas this process computes (local_replicas.h: its own, or all of them simulated),
// GradReducer (distributed/grad_reducer.h), ReplicaSync (local SGD / EASGD), the EpochModel (the weights
// an epoch evaluates and saves), the Evaluator (epoch ends, log.eval_every_steps' points),
// StepReadback, StepRecorder (log.every_steps), the StepProfiler (log.profile_steps), DebugFaults, the
// GraphedStep (replicas.cuda_graph: the step captured in a CUDA graph), and the TrainObserver it reports to
// (it prints nothing itself). start_epoch() makes an EpochState.
//
// The constructor sets up, in this order (RNG draws and collectives depend on it): the data; the
// network from the spec's seed, on its device; the process group and the broadcast of rank 0's
// parameters and buffers; GradReducer, the epoch model and the local replicas (which seed the
// dropout streams); the loader (on the host, or the splits copied to the device), ReplicaSync and run log; then, when
// resuming, the checkpoint; under replicas.cuda_graph, the GraphedStep (its stream current from then on); last,
// replicas.prewarm_steps' passes (their SyncBatchNorm all-reduces before the first step's). Every rank calls the same
// collectives in the same order (c10d needs it): per step GradReducer's all-reduces and ReplicaSync's averaging, a
// buffer broadcast before every forward and before evaluation; at an evaluation point the Evaluator's (evaluator.h),
// then with step records per interval the all-reduce of the epoch's training sums (after the step's gradient reduction,
// before ReplicaSync's); per epoch the Evaluator's, the metric all-reduce, then the consistency audit; per checkpoint
// the gather of the dropout RNG states (after the partial metrics' all-reduce of a clean stop).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/device_data.h"
#include "ddplab/data/loader.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runtime/denormal.h"
#include "ddplab/runtime/device.h"
#include "ddplab/runtime/host_load.h"
#include "ddplab/runtime/step_profiler.h"
#include "ddplab/train/audits.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/early_stop.h"
#include "ddplab/train/epoch_model.h"
#include "ddplab/train/epoch_totals.h"
#include "ddplab/train/evaluator.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/graphed_step.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/lr_schedule.h"
#include "ddplab/train/network.h"
#include "ddplab/train/noise_scale.h"
#include "ddplab/train/observer.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/step_readback.h"
#include "ddplab/train/step_recorder.h"
#include "ddplab/train/trainer.h"

namespace ddplab::train {

class Trainer {
 public:
  // `spec`, `world` and `options` must outlive the Trainer.
  Trainer(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options);

  ReplicaResult run();

 private:
  using Clock = std::chrono::steady_clock;

  // Set-up.
  void connect();
  void build_loader();
  void resume();
  void prewarm_device();

  // The epoch loop.
  void run_epoch(int epoch);
  EpochTotals start_epoch(int epoch);
  void train_steps(int epoch, EpochTotals& totals);
  void stage_next(int64_t step);
  bool train_step(int epoch, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y, EpochTotals& totals);
  at::Tensor step_eagerly(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals);
  at::Tensor step_graphed(const at::Tensor& x, const at::Tensor& y, bool eager, EpochTotals& totals);
  void accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals);
  std::pair<at::Tensor, at::Tensor> forward_backward(const at::Tensor& x, const at::Tensor& y);
  void account_reduction(const at::Tensor& grad_sq, EpochTotals& totals);
  [[noreturn]] void stop_cleanly(int epoch, int64_t step, EpochTotals& totals);
  [[noreturn]] void diverge_agreed(int epoch);
  void broadcast_buffers();

  // The end of an epoch.
  EpochSums reduce_sums(int epoch, const EpochTotals& totals, const Evaluation& test);
  double peak_lr(int epoch) const;
  void audit_replicas(int epoch);
  rundir::EpochRecord epoch_record(int epoch, double epoch_s, const EpochTotals& totals, const EpochSums& sums,
                                   std::optional<double> drift) const;
  void check_not_blown_up(const rundir::EpochRecord& rec) const;
  void select_epoch(const rundir::EpochRecord& rec);
  void note_subnormal_state(int epoch);
  void stopped_early(int epochs_done);
  void maybe_checkpoint(int epoch, const EpochTotals& totals);
  void write_checkpoint(CheckpointState state);
  void save_model();

  // Tells the observer where training is (StepProgress, observer.h).
  void report_step(int epoch, int64_t step, const EpochTotals& totals);

  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  // Rank 0 writes the run directory and reports epochs.
  bool lead() const { return world_.rank == 0; }
  int64_t steps() const { return loader_->steps_per_epoch(); }
  int64_t test_samples() const { return faults_.test_samples(data_->test.size()); }
  bool bf16() const { return spec_.precision == config::Precision::kBf16; }

  const config::ExperimentSpec& spec_;
  const distributed::World& world_;
  const ReplicaOptions& options_;

  // replicas.flush_denormal, set before any member starts a thread (a worker set it before its
  // process group too: runner/worker.cpp); first, so it goes last.
  std::optional<runtime::FlushDenormalGuard> flush_denormal_;
  std::shared_ptr<const data::DatasetPair> data_;  // options_.data (not owned), else loaded here
  Network net_;
  std::shared_ptr<distributed::Comm> comm_;                         // null with one process
  std::optional<distributed::RepeatedBroadcast> buffer_broadcast_;  // rank 0's buffers, before every forward
  std::unique_ptr<distributed::GradReducer> reducer_;
  std::unique_ptr<LocalReplicas> replicas_;
  GradNoiseScale noise_scale_;
  std::optional<data::DeviceData> device_data_;  // dataset.placement: the splits, when batches are made on the device
  std::unique_ptr<data::BatchSource> loader_;
  std::optional<runtime::BatchMover> mover_;  // on CUDA, batch k+1's copy overlaps step k
  std::optional<ReplicaSync> replica_sync_;
  std::optional<EpochModel> epoch_model_;
  std::optional<Evaluator> evaluator_;
  LrSchedule schedule_;
  std::optional<rundir::RunLog> run_;        // only rank 0 writes the run directory
  std::shared_ptr<TrainObserver> observer_;  // options_.observer, else the console (console.h)
  std::optional<StepRecorder> step_recorder_;
  std::optional<runtime::StepProfiler> profiler_;  // log.profile_steps
  CheckpointState resumed_;                        // what the run resumed from (zeros for a fresh run)
  DebugFaults faults_;
  AuditTrail audits_;     // debug.audits: a failure stops the run, or is kept for the epoch's record
  EarlyStop early_stop_;  // the best epoch on validation (best.pt) and early_stop.patience

  ReplicaResult result_;
  int64_t global_step_ = 0;
  bool subnormal_noted_ = false;   // the note of note_subnormal_state, printed once a process
  Clock::time_point train_start_;  // wall_s 0; the manifest's "train_start" is its UTC time

  // What lives for one epoch; start_epoch makes it.
  struct EpochState {
    EpochState(c10::Device device, int rank) : readback(device, rank) {}
    int64_t first_step = 0;            // a resumed epoch starts at the checkpoint's step
    std::vector<at::Tensor> snapshot;  // the parameters at its start, for the update audit
    Clock::time_point start;           // a resumed epoch's start lies before the stop
    runtime::HostSample host_start;    // the host's load counters when this process began the epoch
    StepReadback readback;             // each step's gradient norm and stop flag
  };
  std::optional<EpochState> this_epoch_;

  // replicas.cuda_graph. Last: it makes its stream current from its construction, at the end of the
  // constructor, and waits for that stream before the members above go.
  std::optional<GraphedStep> graphed_;
};

}  // namespace ddplab::train
