#include "ddplab/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/train/autocast.h"
#include "ddplab/train/console.h"
#include "ddplab/train/optimizer.h"
#include "ddplab/train/options.h"
#include "ddplab/train/prewarm.h"
#include "ddplab/train/subnormal_state.h"
#include "ddplab/train/tensor_lists.h"
#include "ddplab/train/trainer_impl.h"

namespace ddplab::train {
namespace {

std::chrono::steady_clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// A batch of `n` samples into the epoch's sums: its mean loss (0-dim float) and correct count. The
// loss in one operator: a float times an integer is exact in float64, so this rounds as
// loss.to(kFloat64) * n added would.
void add_batch(EpochTotals& totals, const at::Tensor& loss, const at::Tensor& correct, int64_t n) {
  totals.loss_sum.add_(loss, n);
  totals.correct += correct;
}

// options.data when given (not owned), else the spec's dataset, loaded.
std::shared_ptr<const data::DatasetPair> dataset_of(const config::ExperimentSpec& spec, const ReplicaOptions& options) {
  if (options.data != nullptr) return {std::shared_ptr<const data::DatasetPair>(), options.data};
  return std::make_shared<const data::DatasetPair>(data::load_dataset(dataset_options(spec.dataset)));
}

// This rank's entry of a checkpoint's per-rank list (`what`: "the states of {} replicas"); an
// Error naming the file when the list is not one entry per process.
const at::Tensor& own_entry(const std::filesystem::path& file, const std::vector<at::Tensor>& entries, const char* what,
                            const distributed::World& world) {
  if (static_cast<int>(entries.size()) != world.size)
    throw Error(fmt::format("{}: holds {}, this run has {} processes; `ddplab run --force` starts the run over",
                            file.string(), fmt::format(fmt::runtime(what), entries.size()), world.size));
  return entries[static_cast<size_t>(world.rank)];
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
  return Trainer(spec, world, options).run();
}

// ---- Set-up -------------------------------------------------------------------------------------

Trainer::Trainer(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options)
    : spec_(spec),
      world_(world),
      options_(options),
      noise_scale_(spec.per_replica_batch, spec.global_batch),
      schedule_(spec.optimizer, spec.schedule, spec.global_batch, spec.epochs),
      faults_(spec.debug, world.rank, options.resume),
      audits_(spec.debug.audits),
      early_stop_(spec.early_stop) {
  at::set_num_threads(spec_.replicas.threads);
  flush_denormal_.emplace(spec_.replicas.flush_denormal);
  data_ = dataset_of(spec_, options_);
  net_ = make_network(spec_, *data_, world_.rank);
  place_on_device(net_, spec_, world_);
  connect();
  reducer_ = std::make_unique<distributed::GradReducer>(net_.params, comm_, grad_reducer_options(spec_.replicas));
  epoch_model_.emplace(net_, spec_.model.ema_decay);
  replicas_ = make_local_replicas(spec_, world_, net_, *reducer_, comm_);
  build_loader();
  if (options_.resume) resume();
  global_step_ = resumed_.global_step;
  profiler_.emplace(spec_.log.profile_from_step, spec_.log.profile_steps, net_.device,
                    rundir::profile_trace_file(options_.run_dir, world_.rank));
  if (spec_.replicas.cuda_graph && !net_.device.is_cuda() && lead())
    observer_->on_note(
        "replicas.cuda_graph on a CPU: nothing is captured; every step runs eagerly in the form a capture takes");
  if (spec_.replicas.cuda_graph)
    graphed_.emplace(net_, *reducer_, [this](const at::Tensor& x, const at::Tensor& y) {
      auto result = forward_backward(x, y);
      faults_.on_gradients(net_.params);
      return result;
    });
  prewarm_device();
  // The manifest's "train_start" (the run's first process only: a resumed clock goes on from the
  // checkpoint's wall_s) is the clock's start, and writing it counts in epoch 1's wall_s.
  const auto now = std::chrono::system_clock::now();
  train_start_ = Clock::now() - as_duration(resumed_.wall_s);
  if (lead() && !options_.resume) run_->update_manifest({{"train_start", rundir::utc_text(now)}});
}

// The process group, rank 0's parameters and buffers broadcast to every rank, and SyncBatchNorm's
// all-reduce. BatchNorm running statistics: rank 0's are broadcast before every training forward
// (DDP's broadcast_buffers=True) and before evaluation, so every rank evaluates the model rank 0 saves.
void Trainer::connect() {
  comm_ = options_.comm;
  if (world_.size == 1) return;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(spec_.replicas.timeout_s * 1000));
  if (!comm_) comm_ = distributed::make_comm(world_, spec_.replicas.backend, timeout);
  std::vector<at::Tensor> state = net_.params;
  state.insert(state.end(), net_.buffers.begin(), net_.buffers.end());
  if (!faults_.skip_broadcast()) distributed::broadcast_coalesced(*comm_, state, 0);
  if (!net_.buffers.empty()) buffer_broadcast_.emplace(net_.buffers);
  if (spec_.model.sync_bn) {
    auto comm = comm_;
    net_.model->set_replica_sum([comm](at::Tensor& t) { distributed::allreduce_sum(*comm, t); });
  }
}

// replicas.prewarm_steps: last before the clock starts, on the stream the steps will run on.
void Trainer::prewarm_device() {
  if (spec_.replicas.prewarm_steps == 0) return;
  const EvalSplit test{data_->test, device_data_ ? &device_data_->test : nullptr};
  const double s = prewarm(net_, test, spec_.per_replica_batch / spec_.accumulate_steps, spec_.replicas.prewarm_steps,
                           faults_, bf16());
  if (lead())
    observer_->on_note(
        fmt::format("replicas.prewarm_steps: {} forward and backward passes and an evaluation before "
                    "the training clock, {:.2f} s",
                    spec_.replicas.prewarm_steps, s));
}

void Trainer::build_loader() {
  const int strided = spec_.dataset.shard == config::DataShard::kStrided ? replicas_->count() : 1;
  if (data::batches_on_device(spec_.dataset.placement, *data_, *net_.transform, net_.device)) {
    device_data_.emplace(*data_, net_.transform, net_.device);
    const data::StepShards shards(data_->train.size(), spec_.global_batch, replicas_->loader_rank(),
                                  replicas_->loader_ranks(), strided);
    loader_ = std::make_unique<data::DeviceLoader>(device_data_->train, shards, spec_.seed, spec_.dataset.order);
  } else {
    loader_ = std::make_unique<data::TrainLoader>(*data_, net_.transform, spec_.global_batch, replicas_->loader_rank(),
                                                  replicas_->loader_ranks(), spec_.seed, spec_.dataset.order,
                                                  /*prefetch=*/4, /*pin_memory=*/net_.device.is_cuda(), strided);
  }
  // Batches made on the device need no copy: the mover passes them through, as on a CPU.
  mover_.emplace(device_data_ ? c10::Device(c10::kCPU) : net_.device);
  TORCH_INTERNAL_ASSERT(steps() > 0, "no step in an epoch of ", data_->train.size(), " samples");
  replica_sync_.emplace(spec_.replicas.sync, steps(), net_.params, comm_);
  step_recorder_.emplace(spec_.log.step_record_every(), steps(), spec_.global_batch, comm_, lead(), net_.device);
  evaluator_.emplace(
      spec_.log, steps(),
      Evaluator::Parts{net_, *data_, device_data_ ? &*device_data_ : nullptr, *epoch_model_, *replica_sync_, *replicas_,
                       comm_, buffer_broadcast_ ? &*buffer_broadcast_ : nullptr, faults_, bf16()});
  if (lead()) run_ = rundir::RunLog::open(options_.run_dir);
  if (lead()) run_->update_manifest({{"data_placement", device_data_ ? "device" : "host"}});
  if (lead() && evaluator_->enabled()) run_->update_manifest({{"step_eval", evaluator_->manifest_entry()}});
  observer_ = options_.observer ? options_.observer
                                : std::make_shared<Console>(spec_, world_, options_.progress, options_.quiet);
}

void Trainer::resume() {
  const auto file = rundir::checkpoint_file(options_.run_dir);
  resumed_ = load_checkpoint(file, *net_.model, *net_.optimizer);
  if (!resumed_.bucket_layout.empty()) reducer_->restore_layout(resumed_.bucket_layout);
  if (!resumed_.comm_hook_states.empty())
    reducer_->load_comm_hook_state(
        own_entry(file, resumed_.comm_hook_states, "the gradient compression states of {} ranks", world_));
  if (!resumed_.replica_states.empty())
    load_replica_state_blob(own_entry(file, resumed_.replica_states, "the states of {} replicas", world_), *net_.model,
                            *net_.optimizer);
  const auto& states = resumed_.rng_states;
  if (!replicas_->set_dropout_states(states) && lead())
    observer_->on_note(fmt::format(
        "the checkpoint holds {} dropout generator states of {} bytes, this run has {} replicas whose {} generators "
        "keep {} bytes (another replica count or device); dropout streams restart from the seed",
        states.size(), states.empty() ? 0 : states[0].numel(), replicas_->count(),
        c10::DeviceTypeName(net_.device.type(), /*lower_case=*/true), replicas_->dropout_state_bytes()));
  noise_scale_.set_state(resumed_.gns_trace, resumed_.gns_grad_sq, resumed_.gns_steps);
  replica_sync_->set_center(resumed_.easgd_center);
  epoch_model_->restore_from(resumed_);
  if (resumed_.best_epoch > 0) early_stop_.restore(resumed_.best_epoch, resumed_.best_metric);
}

// ---- The epoch loop -----------------------------------------------------------------------------

ReplicaResult Trainer::run() {
  try {
    int epoch = static_cast<int>(resumed_.epochs_done);
    for (; epoch < spec_.epochs && !early_stop_.should_stop(epoch); ++epoch) run_epoch(epoch);
    if (epoch < spec_.epochs) stopped_early(epoch);
  } catch (...) {
    if (lead()) run_->append_steps(step_recorder_->take());  // the steps read before a divergence or failure
    throw;
  }
  if (const auto note = profiler_->finish(); note && lead()) observer_->on_note(*note);
  epoch_model_->restore_evaluated();
  save_model();
  if (comm_) distributed::barrier(*comm_);
  return result_;
}

void Trainer::run_epoch(int epoch) {
  EpochTotals totals = start_epoch(epoch);
  train_steps(epoch, totals);
  runtime::synchronize(net_.device);
  const double epoch_s = seconds_since(this_epoch_->start);
  const runtime::HostLoad host = runtime::host_load_between(this_epoch_->host_start, runtime::sample_host());
  totals.comm_wait_s += reducer_->take_comm_wait_s();
  const Evaluation test = evaluator_->at_epoch_end();
  const EpochSums sums = reduce_sums(epoch, totals, test);
  // A run resumed from a stop in the epoch's last step has nothing left of it to audit.
  if (this_epoch_->first_step < steps())
    audits_.run([&] {
      check_gradients_and_updates(net_.named, this_epoch_->snapshot, reducer_->received_grad(), epoch + 1,
                                  sgd_step_bound(spec_.optimizer, peak_lr(epoch)));
    });
  rundir::EpochRecord rec = epoch_record(epoch, epoch_s, totals, sums, test.drift);
  rec.host_cpu_wait_pct = host.cpu_wait_pct;
  rec.host_steal_pct = host.steal_pct;
  audits_.run([&] { check_loss_is_cross_entropy(rec.train_loss, rec.train_acc, epoch + 1); });
  rec.audit_warnings = audits_.take();  // debug.audits warn: rank 0 records its own findings
  if (lead()) {
    run_->append_steps(step_recorder_->take());
    run_->append(rec);
    observer_->on_epoch(rec);
    note_subnormal_state(epoch);
  }
  check_not_blown_up(rec);
  select_epoch(rec);
  result_.epochs_done = epoch + 1;
  result_.final_test_acc = rec.test_acc;
  result_.final_train_loss = rec.train_loss;
  maybe_checkpoint(epoch, totals);
}

// Once a process, on an x86 CPU without replicas.flush_denormal: rank 0's optimizer state's
// denormals when many.
void Trainer::note_subnormal_state(int epoch) {
  if (!kDenormalsAssisted || subnormal_noted_ || spec_.replicas.flush_denormal || !net_.device.is_cpu()) return;
  if (const auto note = subnormal_note(subnormal_state(*net_.optimizer, net_.named), epoch + 1)) {
    observer_->on_note(*note);
    subnormal_noted_ = true;
  }
}

// The accumulators start from zero, or from the checkpoint's partial metrics when resuming inside
// this epoch (rank 0 holds the summed train metrics of all ranks).
EpochTotals Trainer::start_epoch(int epoch) {
  const bool partial = epoch == resumed_.epochs_done && resumed_.step_in_epoch > 0;
  this_epoch_.emplace(net_.device, world_.rank);
  this_epoch_->first_step = partial ? resumed_.step_in_epoch : 0;
  net_.model->train();
  reducer_->reset_received();
  this_epoch_->snapshot = clone_all(net_.params);
  EpochTotals totals = epoch_start_totals(resumed_, epoch, lead(), net_.device);
  // The record's lr is the last step's: already taken if a stop came in the epoch's last step.
  totals.lr =
      this_epoch_->first_step > 0 ? schedule_(epoch + static_cast<double>(this_epoch_->first_step - 1) / steps()) : 0;
  this_epoch_->start = Clock::now() - as_duration(partial ? resumed_.epoch_elapsed_s : 0.0);
  this_epoch_->host_start = runtime::sample_host();
  loader_->start_epoch(epoch, this_epoch_->first_step);
  step_recorder_->start_epoch(epoch, this_epoch_->first_step, partial ? resumed_.loss_sum : 0.0,
                              partial ? resumed_.correct : 0.0);
  return totals;
}

void Trainer::train_steps(int epoch, EpochTotals& totals) {
  for (int64_t step = this_epoch_->first_step; step < steps(); ++step, ++global_step_) {
    profiler_->begin_step(global_step_);
    if (!mover_->staged()) stage_next(step);
    auto [batch_x, batch_y] = mover_->take();
    if (step + 1 < steps()) stage_next(step + 1);
    faults_.before_step(global_step_);
    if (train_step(epoch, step, batch_x, batch_y, totals)) stop_cleanly(epoch, step, totals);
    report_step(epoch, step, totals);
    profiler_->end_step(global_step_);
  }
}

void Trainer::stage_next(int64_t step) {
  auto batch = loader_->next();
  TORCH_INTERNAL_ASSERT(batch.has_value(), "loader ended after ", step, " of ", steps(), " steps");
  mover_->stage(batch->x, batch->y);
}

// One optimizer step; returns whether the replicas agreed to stop after it.
bool Trainer::train_step(int epoch, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y,
                         EpochTotals& totals) {
  totals.lr = schedule_(epoch + static_cast<double>(step) / steps());
  set_lr(*net_.optimizer, totals.lr);
  const bool reduce = replica_sync_->reduces_gradients(global_step_);
  reducer_->set_require_sync(reduce);
  const bool fault_stop = faults_.stop_wanted(global_step_);
  const bool stop_wanted = StopSignals::last() != 0 || fault_stop;
  reducer_->request_stop(stop_wanted);
  broadcast_buffers();
  const at::Tensor grad_sq =
      graphed_ ? step_graphed(batch_x, batch_y, stop_wanted, totals) : step_eagerly(batch_x, batch_y, reduce, totals);
  if (reduce && replicas_->count() > 1) account_reduction(grad_sq, totals);
  this_epoch_->readback.push(grad_sq, reducer_->stop_flag(), global_step_, totals.lr, !reduce && world_.size > 1);
  epoch_model_->after_step(global_step_);
  bool stop = false;
  auto& readback = this_epoch_->readback;
  while (readback.pending() > (step + 1 < steps() ? 1 : 0)) stop = readback.read(epoch, totals.grad_norm_sum) || stop;
  const auto averaged =
      replica_sync_->after_step(global_step_, {stop_wanted, this_epoch_->readback.local_divergence().has_value()});
  stop = stop || averaged.stop;
  totals.comm_bytes += averaged.bytes;
  // After the averaging or elastic step: a point sees what the run holds after this step, as the
  // epoch's end does (an EASGD center a period late otherwise).
  const auto point = evaluator_->at_step(step);
  if (point) this_epoch_->start += as_duration(point->seconds);  // epoch_s counts training only
  step_recorder_->after_step(step, global_step_ + 1, totals.lr, seconds_since(train_start_), totals.loss_sum,
                             totals.correct, point);
  if (averaged.diverged) diverge_agreed(epoch);
  if (audits_.replica_check_deferred() && comm_ && replica_sync_->replicas_agree_after(global_step_)) {
    audits_.run([&] { check_replica_consistency(*comm_, net_.named, epoch, "parameter"); });
    audits_.defer_replica_check(false);
  }
  return stop;
}

// The step's gradient (reduced), then the update; returns |reduced gradient|^2.
at::Tensor Trainer::step_eagerly(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals) {
  replicas_->compute(x, y,
                     [&](const at::Tensor& xs, const at::Tensor& ys) { accumulate_gradients(xs, ys, reduce, totals); });
  at::Tensor grad_sq = reducer_->grad_norm_squared();
  faults_.on_gradients(net_.params);
  net_.optimizer->step();
  return grad_sq;
}

// replicas.cuda_graph (one replica): the step as GraphedStep runs it; `eager` when a stop was asked.
at::Tensor Trainer::step_graphed(const at::Tensor& x, const at::Tensor& y, bool eager, EpochTotals& totals) {
  const GraphedStep::Outputs out = graphed_->step(x, y, totals.lr, eager);
  add_batch(totals, out.loss, out.correct, y.size(0));
  return out.grad_sq;
}

// batch.accumulate_steps micro-batches of one replica's shard, as a DDP no_sync() loop: every
// backward adds its gradient of loss / K to the buckets and only the last one all-reduces the sum
// (if this step reduces at all: local SGD and EASGD steps keep local gradients).
void Trainer::accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals) {
  const int64_t micro = x.size(0) / spec_.accumulate_steps;
  for (int64_t m = 0; m < spec_.accumulate_steps; ++m) {
    reducer_->set_require_sync(reduce && m + 1 == spec_.accumulate_steps);
    reducer_->prepare_for_backward(/*accumulate=*/m > 0);
    const bool whole = spec_.accumulate_steps == 1;
    const auto xm = whole ? x : x.narrow(0, m * micro, micro), ym = whole ? y : y.narrow(0, m * micro, micro);
    const auto [logits, loss] = forward_backward(xm, ym);
    torch::NoGradGuard no_grad;
    add_batch(totals, loss, (logits.argmax(1) == ym).sum(), ym.size(0));
  }
}

// Returns the logits and the mean loss; the gradient (of loss / batch.accumulate_steps) is in the
// buckets, and reduced if this backward syncs (GradReducer), when it returns.
std::pair<at::Tensor, at::Tensor> Trainer::forward_backward(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor logits, loss;
  {
    AutocastScope autocast(net_.device.type(), bf16());
    logits = net_.model->forward(x);
    loss = faults_.loss(logits, y, at::Reduction::Mean);
  }
  (spec_.accumulate_steps > 1 ? loss / static_cast<double>(spec_.accumulate_steps) : loss).backward();
  reducer_->finalize();
  return {logits, loss};
}

// The noise scale and traffic of a step whose gradients were all-reduced over 2+ replicas.
void Trainer::account_reduction(const at::Tensor& grad_sq, EpochTotals& totals) {
  const double n = replicas_->count();
  totals.comm_bytes += distributed::ring_allreduce_bytes(reducer_->payload_bytes(), replicas_->count());
  // |mean gradient|^2: the reduced gradient is N times it under reduce "sum".
  const auto mean_sq = reducer_->options().mean ? grad_sq : grad_sq / (n * n);
  // Under sync_bn a replica's gradient is not that of B/N independent samples (SyncBatchNorm's
  // backward sums the statistics' gradients over the replicas): the estimator's assumption fails,
  // so nothing is measured (docs/ddp-semantics.md).
  if (!spec_.model.sync_bn) noise_scale_.update(replicas_->local_norm_squared_mean(), mean_sq);
}

// Every rank throws at the same agreement point: the rank that diverged names its own step.
void Trainer::diverge_agreed(int epoch) {
  if (this_epoch_->readback.local_divergence()) throw *this_epoch_->readback.local_divergence();
  throw Diverged(fmt::format("diverged by epoch {}, step {}: another replica's local gradient norm was NaN or Inf "
                             "(agreed at the first averaging point or epoch end after it)",
                             epoch + 1, global_step_),
                 epoch + 1, global_step_);
}

// A clean stop after `step`: the checkpoint holds the partial epoch, then Interrupted is thrown.
void Trainer::stop_cleanly(int epoch, int64_t step, EpochTotals& totals) {
  while (this_epoch_->readback.pending() > 0) this_epoch_->readback.read(epoch, totals.grad_norm_sum);
  totals.comm_wait_s += reducer_->take_comm_wait_s();
  const int sig = StopSignals::last() != 0 ? StopSignals::last() : SIGTERM;
  const double wall_s = seconds_since(train_start_);
  auto partial_sums = torch::stack({totals.loss_sum, totals.correct.to(torch::kFloat64)}).cpu();
  if (comm_) distributed::allreduce_sum(*comm_, partial_sums);
  PartialEpoch partial;
  partial.steps_done = step + 1;
  partial.loss_sum = partial_sums[0].item<double>();
  partial.correct = partial_sums[1].item<double>();
  partial.elapsed_s = seconds_since(this_epoch_->start);
  step_recorder_->at_stop(step, global_step_ + 1, totals.lr, wall_s, partial.loss_sum, partial.correct);
  if (lead()) run_->append_steps(step_recorder_->take());
  write_checkpoint(make_checkpoint_state(epoch, global_step_ + 1, wall_s, totals, partial));
  throw Interrupted(
      fmt::format("stopped by {} after step {} (epoch {})", signal_name(sig), global_step_ + 1, epoch + 1), sig);
}

void Trainer::broadcast_buffers() {
  if (buffer_broadcast_) (*buffer_broadcast_)(*comm_, 0);
}

// ---- The end of an epoch ------------------------------------------------------------------------

// The epoch's largest lr (the update audit's bound on an SGD step).
double Trainer::peak_lr(int epoch) const {
  double peak = 0;
  for (int64_t s = 0; s < steps(); ++s) peak = std::max(peak, schedule_(epoch + static_cast<double>(s) / steps()));
  return peak;
}

// The epoch's train and test metrics summed over all replicas, then the replica audit (both
// collectives, in this order on every rank).
EpochSums Trainer::reduce_sums(int epoch, const EpochTotals& totals, const Evaluation& test) {
  const bool local_divergence = this_epoch_->readback.local_divergence().has_value();
  const auto diverged = torch::full({}, local_divergence ? 1.0 : 0.0, totals.loss_sum.options());
  std::vector<at::Tensor> parts{totals.loss_sum, totals.correct.to(torch::kFloat64), test.test.loss_sum,
                                test.test.correct.to(torch::kFloat64), diverged};
  if (test.validation) {
    parts.push_back(test.validation->loss_sum);
    parts.push_back(test.validation->correct.to(torch::kFloat64));
  }
  auto sums = torch::stack(parts).cpu();
  if (comm_) distributed::allreduce_sum(*comm_, sums);
  const auto t = sums.accessor<double, 1>();
  // A local divergence not yet agreed at an averaging point: every rank stops here, before the audit.
  if (t[4] > 0) diverge_agreed(epoch);
  if (comm_) audit_replicas(epoch);
  return {t[0], t[1], t[2], t[3], test.validation ? t[5] : 0, test.validation ? t[6] : 0};
}

// Under local SGD the parameters are checked at the first point at or after the epoch's end where
// the replicas agree; under EASGD the center variable is checked. `epoch` is 0-based.
void Trainer::audit_replicas(int epoch) {
  if (replica_sync_->method() == config::SyncMethod::kEasgd) {
    NamedTensors center;
    const auto c = replica_sync_->center();
    for (size_t i = 0; i < net_.named.size(); ++i) center.emplace_back(net_.named[i].first, c[i]);
    audits_.run([&] { check_replica_consistency(*comm_, center, epoch + 1, "EASGD center variable of parameter"); });
  } else if (replica_sync_->replicas_agree_after(global_step_ - 1)) {
    audits_.run([&] { check_replica_consistency(*comm_, net_.named, epoch + 1, "parameter"); });
  } else {
    audits_.defer_replica_check();
  }
}

rundir::EpochRecord Trainer::epoch_record(int epoch, double epoch_s, const EpochTotals& totals, const EpochSums& sums,
                                          std::optional<double> drift) const {
  EpochContext context;
  context.epoch = epoch + 1;
  context.global_step = global_step_;
  context.steps = steps();
  context.global_batch = spec_.global_batch;
  context.test_samples = test_samples();
  context.val_samples = data_->validation.size();
  context.replicas = replicas_->count();
  context.epoch_s = epoch_s;
  context.wall_s = seconds_since(train_start_);
  const bool reduced = replica_sync_->reduces_gradients(global_step_ - 1);  // the epoch's last step
  return make_epoch_record(context, totals, sums, reduced ? &noise_scale_ : nullptr, drift);
}

void Trainer::check_not_blown_up(const rundir::EpochRecord& rec) const {
  if (!loss_has_blown_up(rec.train_loss, data_->num_classes)) return;
  throw Diverged(fmt::format("diverged in epoch {}: the mean training loss is {:g}, over 100 x ln({}) (lr {:g})",
                             rec.epoch, rec.train_loss, data_->num_classes, rec.lr),
                 rec.epoch, global_step_);
}

// With a validation split: rank 0 saves the epoch that improves on the best as best.pt.
void Trainer::select_epoch(const rundir::EpochRecord& rec) {
  if (rec.val_loss && early_stop_.improved(rec) && lead())
    epoch_model_->with_evaluated([&] { save_module(rundir::best_model_file(options_.run_dir), *net_.model); });
}

// early_stop.patience ran out: the run ends here, done; the manifest says why it has fewer epochs.
void Trainer::stopped_early(int epochs_done) {
  if (!lead()) return;
  run_->update_manifest({{"early_stop", early_stop_.manifest_entry(epochs_done)}});
  observer_->on_note(early_stop_.note(epochs_done));
}

void Trainer::maybe_checkpoint(int epoch, const EpochTotals& totals) {
  const int every = spec_.checkpoint.every_epochs;
  if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == spec_.epochs)
    write_checkpoint(make_checkpoint_state(epoch, global_step_, seconds_since(train_start_), totals, std::nullopt));
}

// Every rank takes part (the RNG states are gathered); rank 0 writes the file.
void Trainer::write_checkpoint(CheckpointState state) {
  state.rng_states = replicas_->dropout_states();
  state.gns_trace = noise_scale_.raw_trace();
  state.gns_grad_sq = noise_scale_.raw_grad_sq();
  state.gns_steps = noise_scale_.steps();
  state.easgd_center = replica_sync_->center();
  epoch_model_->save_to(state);
  state.bucket_layout = reducer_->rebuilt_layout();
  // PowerSGD's error feedback is each rank's own.
  if (const at::Tensor hook = reducer_->comm_hook_state(); hook.defined())
    state.comm_hook_states = comm_ && world_.size > 1 ? gather_blobs(*comm_, hook) : std::vector<at::Tensor>{hook};
  state.best_epoch = early_stop_.best_epoch().value_or(0);
  state.best_metric = early_stop_.best();
  // Local SGD / EASGD over processes: every replica holds weights and momentum of its own.
  if (world_.size > 1 && replica_sync_->method() != config::SyncMethod::kAllreduce)
    state.replica_states = gather_replica_states(*comm_, *net_.model, *net_.optimizer);
  if (!lead()) return;
  save_checkpoint(rundir::checkpoint_file(options_.run_dir), *net_.model, *net_.optimizer, state);
  const rundir::CheckpointMark mark{state.epochs_done, state.step_in_epoch, state.global_step, state.records,
                                    rundir::utc_now()};
  run_->update_manifest({{"checkpoint", mark.to_json()}});
}

void Trainer::save_model() {
  if (!lead()) return;
  net_.model->to(torch::kCPU);
  save_module(rundir::model_file(options_.run_dir), *net_.model);
}

// ---- Observer ----------------------------------------------------------------------------------

void Trainer::report_step(int epoch, int64_t step, const EpochTotals& totals) {
  StepProgress p;
  p.epoch = epoch;
  p.step = step;
  p.steps = steps();
  p.epoch_elapsed_s = seconds_since(this_epoch_->start);
  p.loss_sum = totals.loss_sum;
  // Rank 0 of a run resumed inside this epoch starts from the checkpoint's sums over all replicas.
  const bool restored = lead() && this_epoch_->first_step > 0 && epoch == resumed_.epochs_done;
  p.restored_loss_sum = restored ? resumed_.loss_sum : 0.0;
  p.samples = static_cast<double>((step + 1 - this_epoch_->first_step) * spec_.per_replica_batch) *
              static_cast<double>(replicas_->ids().size());
  observer_->on_step(p);
}

}  // namespace ddplab::train
