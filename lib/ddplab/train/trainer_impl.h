// Trainer: the loop of train_replica (trainer.h), internal to train/. What it composes is in files of
// its own (docs/architecture.md, "The trainer", lists them); the features with hooks and checkpoint
// state of their own are parts (part.h, parts.cpp's registry), and every write to the run directory
// goes through the RunWriter (run_writer.h): the loop prints nothing and asks no rank.
//
// The constructor sets up, in this order (RNG draws and collectives depend on it): the data; the
// network from the spec's seed, on its device; the process group and the broadcast of rank 0's
// parameters and buffers; GradReducer, the epoch model and the local replicas (which seed the
// dropout streams); the loader (on the host, or the splits copied to the device), ReplicaSync, the
// run writer and the parts; then, when resuming, the checkpoint; under replicas.cuda_graph, the
// GraphedStep (its stream current from then on); last, replicas.prewarm_steps' passes (their
// SyncBatchNorm all-reduces before the first step's). Every rank calls the same collectives in the
// same order (c10d needs it): per step GradReducer's all-reduces and ReplicaSync's averaging, a
// buffer broadcast before every forward and before evaluation; at an evaluation point the
// Evaluator's (evaluator.h), then the parts' after_step (step records: per interval the all-reduce
// of the epoch's training sums); per epoch the Evaluator's, the metric all-reduce, then the
// consistency audit; per checkpoint the gather of the dropout RNG states, then the parts' save
// (after the partial metrics' all-reduce of a clean stop).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runtime/host_load.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/epoch_audits.h"
#include "ddplab/train/epoch_totals.h"
#include "ddplab/train/evaluator.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/lr_schedule.h"
#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/run_writer.h"
#include "ddplab/train/step_readback.h"
#include "ddplab/train/step_runner.h"
#include "ddplab/train/train_input.h"
#include "ddplab/train/trainer.h"

namespace ddplab::train {

class Trainer {
 public:
  // `spec` and `world` must outlive the Trainer.
  Trainer(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options);

  ReplicaResult run();

 private:
  using Clock = std::chrono::steady_clock;

  // What lives for one epoch (`index`, 0-based); start_epoch fills it.
  struct Epoch {
    Epoch(int index, c10::Device device, int rank) : index(index), readback(device, rank) {}
    int index;
    EpochTotals totals;
    int64_t first_step = 0;          // a resumed epoch starts at the checkpoint's step
    double restored_loss_sum = 0;    // the part of totals.loss_sum the checkpoint gave (rank 0)
    Clock::time_point start;         // a resumed epoch's start lies before the stop
    runtime::HostSample host_start;  // the host's load counters when this process began the epoch
    StepReadback readback;           // each step's gradient norm and stop flag
  };

  // Set-up.
  void build_loader(const ReplicaOptions& options);
  void resume();
  void prewarm_device();

  // The epoch loop.
  rundir::EpochRecord run_epoch(int index);
  void start_epoch(Epoch& e);
  void train_steps(Epoch& e);
  bool train_step(Epoch& e, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y);
  [[noreturn]] void stop_cleanly(Epoch& e, int64_t step);
  [[noreturn]] void diverge_agreed(const Epoch& e);
  void report_step(const Epoch& e, int64_t step);  // to the observer (StepProgress, observer.h)

  // The end of an epoch.
  EpochSums reduce_sums(const Epoch& e, const Evaluation& test);
  rundir::EpochRecord epoch_record(const Epoch& e, double epoch_s, const EpochSums& sums,
                                   std::optional<double> drift) const;
  void check_not_blown_up(const rundir::EpochRecord& rec) const;
  bool stops_before(int epochs_done) const;
  void maybe_checkpoint(const Epoch& e);
  void write_checkpoint(CheckpointState state);

  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  int64_t steps() const { return input_.steps(); }

  const config::ExperimentSpec& spec_;
  const distributed::World& world_;
  TrainInput input_;
  Network net_;
  std::shared_ptr<distributed::Comm> comm_;  // null with one process
  std::unique_ptr<distributed::GradReducer> reducer_;
  std::unique_ptr<LocalReplicas> replicas_;
  std::optional<ReplicaSync> replica_sync_;
  std::optional<Evaluator> evaluator_;  // with the EpochModel, the weights an epoch evaluates and saves
  LrSchedule schedule_;
  std::optional<EpochAudits> audits_;
  std::optional<RunWriter> writer_;
  std::vector<std::unique_ptr<Part>> parts_;  // in the registry's order (parts.cpp)
  CheckpointState resumed_;                   // what the run resumed from (zeros for a fresh run)
  DebugFaults faults_;
  int64_t global_step_ = 0;
  Clock::time_point train_start_;  // wall_s 0; the manifest's "train_start" is its UTC time

  // Last: under replicas.cuda_graph it makes its stream current from the end of the constructor
  // on, and waits for that stream before the members above go.
  std::optional<StepRunner> step_;
};

}  // namespace ddplab::train
