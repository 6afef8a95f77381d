#include "ddplab/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/runtime/denormal.h"
#include "ddplab/train/console.h"
#include "ddplab/train/optimizer.h"
#include "ddplab/train/options.h"
#include "ddplab/train/prewarm.h"
#include "ddplab/train/trainer_impl.h"

namespace ddplab::train {
namespace {

std::chrono::steady_clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

void check_setup(const config::ExperimentSpec& spec, const data::DatasetPair& data) {
  torch::NoGradGuard no_grad;
  make_network(spec, data, /*rank=*/0);
}

bool loss_has_blown_up(double mean_train_loss, int64_t num_classes) {
  return !std::isfinite(mean_train_loss) || mean_train_loss > 100.0 * std::log(static_cast<double>(num_classes));
}

ReplicaResult train_replica(const config::ExperimentSpec& spec, const distributed::World& world,
                            const ReplicaOptions& options) {
  at::set_num_threads(spec.replicas.threads);
  // replicas.flush_denormal, set before the Trainer starts a thread (a worker set it before its
  // process group too: runner/worker.cpp) and reset after its threads are gone.
  const runtime::FlushDenormalGuard flush_denormal(spec.replicas.flush_denormal);
  return Trainer(spec, world, options).run();
}

// ---- Set-up -------------------------------------------------------------------------------------

Trainer::Trainer(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options)
    : spec_(spec),
      world_(world),
      input_(spec, options.data),
      schedule_(spec.optimizer, spec.schedule, spec.global_batch, spec.epochs),
      faults_(spec.debug, world.rank, options.resume) {
  net_ = make_network(spec_, input_.data(), world_.rank);
  place_on_device(net_, spec_, world_);
  // BatchNorm running statistics: rank 0's are broadcast before every training forward (DDP's
  // broadcast_buffers=True: StepRunner) and before evaluation, so every rank evaluates the model rank 0 saves.
  comm_ = connect(net_, spec_, world_, options.comm, !faults_.skip_broadcast());
  reducer_ = std::make_unique<distributed::GradReducer>(net_.params, comm_, grad_reducer_options(spec_.replicas));
  replicas_ = make_local_replicas(spec_, world_, net_, *reducer_, comm_);
  build_loader(options);
  if (options.resume) resume();
  global_step_ = resumed_.global_step;
  if (spec_.replicas.cuda_graph && !net_.device.is_cuda())
    writer_->note(
        "replicas.cuda_graph on a CPU: nothing is captured; every step runs eagerly in the form a capture takes");
  if (spec_.replicas.cuda_graph) step_->capture();
  prewarm_device();
  // The manifest's "train_start" (the run's first process only: a resumed clock goes on from the
  // checkpoint's wall_s) is the clock's start, and writing it counts in epoch 1's wall_s.
  const auto now = std::chrono::system_clock::now();
  train_start_ = Clock::now() - as_duration(resumed_.wall_s);
  if (!options.resume) writer_->update_manifest({{"train_start", rundir::utc_text(now)}});
}

// replicas.prewarm_steps: last before the clock starts, on the stream the steps will run on.
void Trainer::prewarm_device() {
  if (spec_.replicas.prewarm_steps == 0) return;
  const EvalSplit test{input_.data().test, input_.on_device() ? &input_.on_device()->test : nullptr};
  const double s = prewarm(net_, test, spec_.per_replica_batch / spec_.accumulate_steps, spec_.replicas.prewarm_steps,
                           faults_, spec_.precision == config::Precision::kBf16);
  writer_->note(
      fmt::format("replicas.prewarm_steps: {} forward and backward passes and an evaluation before "
                  "the training clock, {:.2f} s",
                  spec_.replicas.prewarm_steps, s));
}

void Trainer::build_loader(const ReplicaOptions& options) {
  input_.start(spec_, net_, *replicas_);
  replica_sync_.emplace(spec_.replicas.sync, steps(), net_.params, comm_);
  step_.emplace(spec_, net_, *reducer_, *replicas_, faults_, comm_);
  evaluator_.emplace(spec_.log, spec_.model.ema_decay, steps(),
                     Evaluator::Parts{net_, input_.data(), input_.on_device(), *replica_sync_, *replicas_, comm_,
                                      step_->buffer_broadcast(), faults_, spec_.precision == config::Precision::kBf16});
  audits_.emplace(spec_, net_, *reducer_, *replica_sync_, schedule_, steps(), comm_);
  writer_.emplace(
      options.run_dir, world_.rank == 0,
      options.observer ? options.observer : std::make_shared<Console>(spec_, world_, options.progress, options.quiet));
  writer_->update_manifest(
      {{"data_placement", input_.on_device() ? "device" : "host"}, {"lr_schedule", schedule_.manifest_entry(steps())}});
  if (evaluator_->enabled()) writer_->update_manifest({{"step_eval", evaluator_->manifest_entry()}});
  parts_ = make_parts({spec_, world_, net_, *reducer_, *replicas_, *replica_sync_, evaluator_->epoch_model(), comm_,
                       *writer_, steps()});
}

void Trainer::resume() {
  const auto file = rundir::checkpoint_file(writer_->run_dir());
  resumed_ = load_checkpoint(file, *net_.model, *net_.optimizer);
  for (auto& part : parts_) part->load(resumed_.parts, file);
  const auto& states = resumed_.rng_states;
  if (!replicas_->set_dropout_states(states))
    writer_->note(fmt::format(
        "the checkpoint holds {} dropout generator states of {} bytes, this run has {} replicas whose {} generators "
        "keep {} bytes (another replica count or device); dropout streams restart from the seed",
        states.size(), states.empty() ? 0 : states[0].numel(), replicas_->count(),
        c10::DeviceTypeName(net_.device.type(), /*lower_case=*/true), replicas_->dropout_state_bytes()));
}

// ---- The epoch loop -----------------------------------------------------------------------------

ReplicaResult Trainer::run() {
  ReplicaResult result;
  int epoch = static_cast<int>(resumed_.epochs_done);
  try {
    for (; epoch < spec_.epochs && !stops_before(epoch); ++epoch) {
      const rundir::EpochRecord rec = run_epoch(epoch);
      result = {epoch + 1, rec.test_acc, rec.train_loss};
    }
  } catch (...) {
    for (auto& part : parts_) part->on_failure();
    throw;
  }
  for (auto& part : parts_) part->end_run(epoch);
  evaluator_->epoch_model().restore_evaluated();
  writer_->save_model(*net_.model);
  if (comm_) distributed::barrier(*comm_);
  return result;
}

bool Trainer::stops_before(int epochs_done) const {
  return std::any_of(parts_.begin(), parts_.end(), [&](const auto& part) { return part->stops_before(epochs_done); });
}

rundir::EpochRecord Trainer::run_epoch(int index) {
  Epoch e(index, net_.device, world_.rank);
  start_epoch(e);
  train_steps(e);
  runtime::synchronize(net_.device);
  const double epoch_s = seconds_since(e.start);
  const runtime::HostLoad host = runtime::host_load_between(e.host_start, runtime::sample_host());
  e.totals.comm_wait_s += reducer_->take_comm_wait_s();
  const Evaluation test = evaluator_->at_epoch_end();
  const EpochSums sums = reduce_sums(e, test);
  rundir::EpochRecord rec = epoch_record(e, epoch_s, sums, test.drift);
  rec.host_cpu_wait_pct = host.cpu_wait_pct;
  rec.host_steal_pct = host.steal_pct;
  // A run resumed from a stop in the epoch's last step has nothing left of it to audit. Under
  // debug.audits warn rank 0 records its own findings.
  rec.audit_warnings = audits_->at_end(index, e.first_step < steps(), rec);
  for (auto& part : parts_) part->before_record(rec);
  writer_->append(rec);
  check_not_blown_up(rec);
  for (auto& part : parts_) part->end_epoch(rec);
  maybe_checkpoint(e);
  return rec;
}

// The accumulators start from zero, or from the checkpoint's partial metrics when resuming inside
// this epoch (rank 0 holds the summed train metrics of all ranks).
void Trainer::start_epoch(Epoch& e) {
  const bool partial = e.index == resumed_.epochs_done && resumed_.step_in_epoch > 0;
  e.first_step = partial ? resumed_.step_in_epoch : 0;
  net_.model->train();
  audits_->start_epoch();
  e.totals = epoch_start_totals(resumed_, e.index, world_.rank == 0, net_.device);
  e.restored_loss_sum = partial && world_.rank == 0 ? resumed_.loss_sum : 0.0;
  // The record's lr is the last step's: already taken if a stop came in the epoch's last step.
  e.totals.lr = e.first_step > 0 ? schedule_(e.index + static_cast<double>(e.first_step - 1) / steps()) : 0;
  e.start = Clock::now() - as_duration(partial ? resumed_.epoch_elapsed_s : 0.0);
  e.host_start = runtime::sample_host();
  input_.start_epoch(e.index, e.first_step);
  for (auto& part : parts_)
    part->start_epoch(e.index, e.first_step, partial ? resumed_.loss_sum : 0.0, partial ? resumed_.correct : 0.0);
}

void Trainer::train_steps(Epoch& e) {
  for (int64_t step = e.first_step; step < steps(); ++step, ++global_step_) {
    for (auto& part : parts_) part->begin_step(global_step_);
    const auto [batch_x, batch_y] = input_.take(step);
    faults_.before_step(global_step_);
    if (train_step(e, step, batch_x, batch_y)) stop_cleanly(e, step);
    report_step(e, step);
    for (auto& part : parts_) part->end_step(global_step_);
  }
}

// One optimizer step; returns whether the replicas agreed to stop after it.
bool Trainer::train_step(Epoch& e, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y) {
  EpochTotals& totals = e.totals;
  totals.lr = schedule_(e.index + static_cast<double>(step) / steps());
  set_lr(*net_.optimizer, totals.lr);
  const bool reduce = replica_sync_->reduces_gradients(global_step_);
  reducer_->set_require_sync(reduce);
  const bool fault_stop = faults_.stop_wanted(global_step_);
  const bool stop_wanted = StopSignals::last() != 0 || fault_stop;
  reducer_->request_stop(stop_wanted);
  const at::Tensor grad_sq = (*step_)(batch_x, batch_y, reduce, stop_wanted, totals);
  const bool reduced = reduce && replicas_->count() > 1;
  if (reduced) totals.comm_bytes += distributed::ring_allreduce_bytes(reducer_->payload_bytes(), replicas_->count());
  for (auto& part : parts_) part->after_update({global_step_, grad_sq, reduced});
  e.readback.push(grad_sq, reducer_->stop_flag(), global_step_, totals.lr, !reduce && world_.size > 1);
  bool stop = false;
  while (e.readback.pending() > (step + 1 < steps() ? 1 : 0))
    stop = e.readback.read(e.index, totals.grad_norm_sum) || stop;
  const auto averaged =
      replica_sync_->after_step(global_step_, {stop_wanted, e.readback.local_divergence().has_value()});
  stop = stop || averaged.stop;
  totals.comm_bytes += averaged.bytes;
  // After the averaging or elastic step: a point sees what the run holds after this step, as the
  // epoch's end does (an EASGD center a period late otherwise).
  const auto point = evaluator_->at_step(step);
  if (point) e.start += as_duration(point->seconds);  // epoch_s counts training only
  const StepEnd end{step, global_step_ + 1, totals.lr, seconds_since(train_start_), totals, point};
  for (auto& part : parts_) part->after_step(end);
  if (averaged.diverged) diverge_agreed(e);
  audits_->after_step(e.index, global_step_);
  return stop;
}

// Every rank throws at the same agreement point: the rank that diverged names its own step.
void Trainer::diverge_agreed(const Epoch& e) {
  if (e.readback.local_divergence()) throw *e.readback.local_divergence();
  throw Diverged(fmt::format("diverged by epoch {}, step {}: another replica's local gradient norm was NaN or Inf "
                             "(agreed at the first averaging point or epoch end after it)",
                             e.index + 1, global_step_),
                 e.index + 1, global_step_);
}

// A clean stop after `step`: the checkpoint holds the partial epoch, then Interrupted is thrown.
void Trainer::stop_cleanly(Epoch& e, int64_t step) {
  while (e.readback.pending() > 0) e.readback.read(e.index, e.totals.grad_norm_sum);
  e.totals.comm_wait_s += reducer_->take_comm_wait_s();
  const int sig = StopSignals::last() != 0 ? StopSignals::last() : SIGTERM;
  const double wall_s = seconds_since(train_start_);
  auto sums = torch::stack({e.totals.loss_sum, e.totals.correct.to(torch::kFloat64)}).cpu();
  if (comm_) distributed::allreduce_sum(*comm_, sums);
  const PartialEpoch partial{step + 1, sums[0].item<double>(), sums[1].item<double>(), seconds_since(e.start)};
  const StopPoint at{step, global_step_ + 1, e.totals.lr, wall_s, partial.loss_sum, partial.correct};
  for (auto& part : parts_) part->at_stop(at);
  write_checkpoint(make_checkpoint_state(e.index, global_step_ + 1, wall_s, e.totals, partial));
  throw Interrupted(
      fmt::format("stopped by {} after step {} (epoch {})", signal_name(sig), global_step_ + 1, e.index + 1), sig);
}

void Trainer::report_step(const Epoch& e, int64_t step) {
  StepProgress p;
  p.epoch = e.index;
  p.step = step;
  p.steps = steps();
  p.epoch_elapsed_s = seconds_since(e.start);
  p.loss_sum = e.totals.loss_sum;
  p.restored_loss_sum = e.restored_loss_sum;
  p.samples = static_cast<double>((step + 1 - e.first_step) * spec_.per_replica_batch) *
              static_cast<double>(replicas_->ids().size());
  writer_->observer().on_step(p);
}

// ---- The end of an epoch ------------------------------------------------------------------------

// The epoch's train and test metrics summed over all replicas, then the replica audit (both
// collectives, in this order on every rank).
EpochSums Trainer::reduce_sums(const Epoch& e, const Evaluation& test) {
  const bool local_divergence = e.readback.local_divergence().has_value();
  const auto diverged = torch::full({}, local_divergence ? 1.0 : 0.0, e.totals.loss_sum.options());
  std::vector<at::Tensor> parts{e.totals.loss_sum, e.totals.correct.to(torch::kFloat64), test.test.loss_sum,
                                test.test.correct.to(torch::kFloat64), diverged};
  if (test.validation) {
    parts.push_back(test.validation->loss_sum);
    parts.push_back(test.validation->correct.to(torch::kFloat64));
  }
  auto sums = torch::stack(parts).cpu();
  if (comm_) distributed::allreduce_sum(*comm_, sums);
  const auto t = sums.accessor<double, 1>();
  // A local divergence not yet agreed at an averaging point: every rank stops here, before the audit.
  if (t[4] > 0) diverge_agreed(e);
  audits_->check_replicas(e.index, global_step_);
  return {t[0], t[1], t[2], t[3], test.validation ? t[5] : 0, test.validation ? t[6] : 0};
}

rundir::EpochRecord Trainer::epoch_record(const Epoch& e, double epoch_s, const EpochSums& sums,
                                          std::optional<double> drift) const {
  EpochContext context;
  context.epoch = e.index + 1;
  context.global_step = global_step_;
  context.steps = steps();
  context.global_batch = spec_.global_batch;
  context.test_samples = faults_.test_samples(input_.data().test.size());
  context.val_samples = input_.data().validation.size();
  context.replicas = replicas_->count();
  context.epoch_s = epoch_s;
  context.wall_s = seconds_since(train_start_);
  return make_epoch_record(context, e.totals, sums, drift);
}

void Trainer::check_not_blown_up(const rundir::EpochRecord& rec) const {
  if (!loss_has_blown_up(rec.train_loss, input_.data().num_classes)) return;
  throw Diverged(fmt::format("diverged in epoch {}: the mean training loss is {:g}, over 100 x ln({}) (lr {:g})",
                             rec.epoch, rec.train_loss, input_.data().num_classes, rec.lr),
                 rec.epoch, global_step_);
}

void Trainer::maybe_checkpoint(const Epoch& e) {
  const int every = spec_.checkpoint.every_epochs;
  if ((every > 0 && (e.index + 1) % every == 0) || e.index + 1 == spec_.epochs)
    write_checkpoint(make_checkpoint_state(e.index, global_step_, seconds_since(train_start_), e.totals, std::nullopt));
}

// Every rank takes part (the RNG states are gathered, a part may gather); rank 0 writes the file.
void Trainer::write_checkpoint(CheckpointState state) {
  state.rng_states = replicas_->dropout_states();
  for (auto& part : parts_) part->save(state.parts);
  writer_->save_checkpoint(*net_.model, *net_.optimizer, state);
}

}  // namespace ddplab::train
