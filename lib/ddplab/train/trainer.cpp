#include "ddplab/train/trainer.h"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/train/autocast.h"
#include "ddplab/train/console.h"
#include "ddplab/train/loss.h"
#include "ddplab/train/optimizer.h"
#include "ddplab/train/options.h"
#include "ddplab/train/tensor_lists.h"
#include "ddplab/train/trainer_impl.h"

namespace ddplab::train {
namespace {

// The model's input: what the transform makes (24x24 for tf_tutorial), train and eval alike.
models::InputShape input_shape(const data::Transform& transform, const data::DatasetPair& data) {
  const data::ImageSize image = transform.output_size();
  return {image.channels, image.height, image.width, data.num_classes};
}

// One step needs a whole global batch: the loader drops the last partial one, as drop_last=True.
void check_batch_fits(const config::ExperimentSpec& spec, const data::DatasetPair& data) {
  if (spec.global_batch > data.train.size())
    throw config::spec_error(
        "/batch", fmt::format("the global batch {} ({} x {}) is larger than the {} training "
                              "samples{}; not one step would run",
                              spec.global_batch, spec.replicas.count, spec.per_replica_batch, data.train.size(),
                              spec.dataset.train_limit > 0 ? " (dataset.train_limit)" : ""));
}

// Local SGD and EASGD evaluate and save averaged weights (the replicas' mean, the center). A model
// with BatchNorm would be evaluated with rank 0's running statistics, gathered for rank 0's own
// weights, not for the averaged ones: a biased test accuracy and saved model. Refused rather than
// measured wrong (docs/ddp-semantics.md, item 2).
void check_sync_fits_model(const config::ExperimentSpec& spec, torch::nn::Module& model) {
  if (spec.replicas.sync.method == config::SyncMethod::kAllreduce || spec.replicas.count < 2 || model.buffers().empty())
    return;
  throw config::spec_error(
      "/replicas/sync",
      fmt::format("{} evaluates and saves averaged weights, but model.name \"{}\" has BatchNorm running statistics, "
                  "which would be rank 0's, gathered for other weights; use replicas.sync \"allreduce\" or a model "
                  "without BatchNorm ({}), got {}",
                  config::name(spec.replicas.sync.method), spec.model.name,
                  fmt::join(models::model_names(/*has_batch_norm=*/false), ", "),
                  config::name(spec.replicas.sync.method)));
}

// BatchNorm's running statistics, not its integer batch count: what the weight EMA averages.
std::vector<at::Tensor> floating(const std::vector<at::Tensor>& buffers) {
  std::vector<at::Tensor> out;
  for (const auto& b : buffers)
    if (b.is_floating_point()) out.push_back(b);
  return out;
}

NamedTensors named_parameters(torch::nn::Module& model) {
  NamedTensors named;
  for (const auto& item : model.named_parameters()) named.emplace_back(item.key(), item.value());
  return named;
}

std::chrono::steady_clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

void check_setup(const config::ExperimentSpec& spec, const data::DatasetPair& data) {
  check_batch_fits(spec, data);
  torch::NoGradGuard no_grad;
  const auto transform = data::make_transform(spec.dataset.augment, data);
  auto model = models::make_model(model_options(spec.model), input_shape(*transform, data));
  check_sync_fits_model(spec, *model);
  make_optimizer(spec.optimizer, named_parameters(*model));
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
      rank_(world.rank),
      size_(world.size),
      noise_scale_(spec.per_replica_batch, spec.global_batch),
      schedule_(spec.optimizer, spec.schedule, spec.global_batch, spec.epochs),
      audits_(spec.debug.audits),
      early_stop_(spec.early_stop) {
  TORCH_INTERNAL_ASSERT(!simulated() || size_ == 1, "simulated replicas run in one process, got world size ", size_);
  at::set_num_threads(spec_.replicas.threads);
  load_data();
  build_model();
  connect();
  build_training();
  build_loader();
  checkpoint_file_ = rundir::checkpoint_file(options_.run_dir);
  if (options_.resume) resume();
  faults_armed_ = !options_.resume;
  global_step_ = resumed_.global_step;
  train_start_ = Clock::now() - as_duration(resumed_.wall_s);
}

void Trainer::load_data() {
  if (options_.data == nullptr) loaded_ = data::load_dataset(dataset_options(spec_.dataset));
  data_ = options_.data != nullptr ? options_.data : &loaded_;
  transform_ = data::make_transform(spec_.dataset.augment, *data_);
}

// Every rank draws the same initial weights (rank 0's are broadcast anyway), except under debug
// fault skip_broadcast, which must leave the replicas different.
void Trainer::build_model() {
  torch::manual_seed(static_cast<uint64_t>(spec_.seed) + (spec_.debug.has(config::Fault::kSkipBroadcast) ? rank_ : 0));
  model_ = models::make_model(model_options(spec_.model), input_shape(*transform_, *data_));
  check_sync_fits_model(spec_, *model_);
  place_on_device();
}

// CUDA: rank -> GPU local_rank. NCCL needs a GPU per rank; gloo may put several ranks on one GPU
// (local_rank modulo the GPU count), which lets one GPU test N > 1. Without a CUDA build the
// spec rejects device "cuda".
void Trainer::place_on_device() {
  if (spec_.replicas.device != config::Device::kCuda) return;
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const int local_rank = world_.local_rank;
  if (gpus == 0 || (spec_.replicas.backend == config::Backend::kNccl && gpus <= local_rank))
    throw config::spec_error("/replicas/device",
                             fmt::format("cuda: local rank {} needs GPU {}, but {} GPU(s) are visible "
                                         "(NCCL needs one GPU per rank; backend gloo can share one)",
                                         local_rank, local_rank, gpus));
  device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  runtime::select_device(device_);
  model_->to(device_);
}

// The process group, rank 0's parameters and buffers broadcast to every rank, and SyncBatchNorm's
// all-reduce. BatchNorm running statistics: rank 0's are broadcast before every training forward
// (DDP's broadcast_buffers=True) and before evaluation, so every rank evaluates the model rank 0 saves.
void Trainer::connect() {
  comm_ = options_.comm;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(spec_.replicas.timeout_s * 1000));
  if (size_ > 1) {
    if (!comm_) comm_ = distributed::make_comm(world_, spec_.replicas.backend, timeout);
    std::vector<at::Tensor> state;
    for (auto& p : model_->parameters()) state.push_back(p);
    for (auto& b : model_->buffers()) state.push_back(b);
    if (!spec_.debug.has(config::Fault::kSkipBroadcast)) distributed::broadcast_coalesced(*comm_, state, 0);
    if (spec_.model.sync_bn) {
      auto comm = comm_;
      model_->set_replica_sum([comm](at::Tensor& t) { distributed::allreduce_sum(*comm, t); });
    }
  }
  for (auto& b : model_->buffers()) buffers_.push_back(b);
}

// Each replica draws its own dropout masks, as separate DDP processes do.
uint64_t Trainer::dropout_seed(int replica) const {
  return static_cast<uint64_t>(spec_.seed) * 1000003ULL + 1 + replica;
}

void Trainer::build_training() {
  torch::manual_seed(dropout_seed(rank_));
  named_ = named_parameters(*model_);
  for (const auto& [name, p] : named_) params_.push_back(p);
  optimizer_ = make_optimizer(spec_.optimizer, named_);
  sync_options_ = grad_sync_options(spec_.replicas);
  sync_.emplace(params_, comm_, sync_options_);
  if (spec_.model.ema_decay > 0) weight_ema_.emplace(params_, spec_.model.ema_decay, floating(buffers_));
  if (simulated()) {
    std::vector<uint64_t> seeds;
    for (int r = 0; r < replicas(); ++r) seeds.push_back(dropout_seed(r));
    sim_.emplace(*model_, params_, seeds, sync_options_.mean, device_, sync_options_.compress_bf16);
  }
}

// A simulating process loads the whole global batch and splits it into the replicas' shards.
void Trainer::build_loader() {
  const bool strided = spec_.dataset.shard == config::DataShard::kStrided;
  loader_.emplace(*data_, transform_, spec_.global_batch, simulated() ? 0 : rank_, simulated() ? 1 : size_, spec_.seed,
                  spec_.dataset.order, /*prefetch=*/4, /*pin_memory=*/device_.is_cuda(), strided ? replicas() : 1);
  mover_.emplace(device_);  // on CUDA, batch k+1's copy overlaps step k
  check_batch_fits(spec_, *data_);
  steps_ = loader_->steps_per_epoch();
  TORCH_INTERNAL_ASSERT(steps_ > 0, "no step in an epoch of ", data_->train.size(), " samples");
  replica_sync_.emplace(spec_.replicas.sync, steps_, params_, comm_);
  step_log_.emplace(spec_.log.every_steps, steps_, spec_.global_batch);
  if (lead()) run_ = rundir::RunLog::open(options_.run_dir);
  observer_ = options_.observer ? options_.observer
                                : std::make_shared<Console>(spec_, world_, options_.progress, options_.quiet);
  for (int r = simulated() ? 0 : rank_; r < (simulated() ? replicas() : rank_ + 1); ++r) local_replicas_.push_back(r);
  // Dropout draws from the default generator of the device it runs on (Philox on CUDA).
  dropout_generator_ = at::globalContext().defaultGenerator(device_.is_cuda() ? device_ : c10::Device(c10::kCPU));
}

at::Tensor Trainer::dropout_state() {
  std::lock_guard<std::mutex> lock(dropout_generator_.mutex());
  return dropout_generator_.get_state();
}

void Trainer::resume() {
  resumed_ = load_checkpoint(checkpoint_file_, *model_, *optimizer_);
  if (!resumed_.bucket_layout.empty()) sync_->restore_layout(resumed_.bucket_layout);
  if (!resumed_.replica_states.empty()) {
    if (static_cast<int>(resumed_.replica_states.size()) != size_)
      throw Error(
          fmt::format("{}: holds the states of {} replicas, this run has {} processes; `ddplab run --force` "
                      "starts the run over",
                      checkpoint_file_.string(), resumed_.replica_states.size(), size_));
    load_replica_state_blob(resumed_.replica_states[static_cast<size_t>(rank_)], *model_, *optimizer_);
  }
  const auto& states = resumed_.rng_states;
  const int64_t state_bytes = dropout_state().numel();
  if (static_cast<int>(states.size()) == replicas() && states[0].numel() == state_bytes) {
    if (sim_) {
      sim_->set_rng_states(states);
    } else {
      std::lock_guard<std::mutex> lock(dropout_generator_.mutex());
      dropout_generator_.set_state(states[rank_]);
    }
  } else if (lead()) {
    observer_->on_note(fmt::format(
        "the checkpoint holds {} dropout generator states of {} bytes, this run has {} replicas whose {} generators "
        "keep {} bytes (another replica count or device); dropout streams restart from the seed",
        states.size(), states.empty() ? 0 : states[0].numel(), replicas(),
        c10::DeviceTypeName(device_.type(), /*lower_case=*/true), state_bytes));
  }
  noise_scale_.set_state(resumed_.gns_trace, resumed_.gns_grad_sq, resumed_.gns_steps);
  replica_sync_->set_center(resumed_.easgd_center);
  if (weight_ema_ && !resumed_.weight_ema.empty()) weight_ema_->set_averages(resumed_.weight_ema);
  if (weight_ema_ && !resumed_.weight_ema_buffers.empty())
    weight_ema_->set_buffer_averages(resumed_.weight_ema_buffers);
  if (resumed_.best_epoch > 0) early_stop_.restore(resumed_.best_epoch, resumed_.best_metric);
}

// ---- The epoch loop -----------------------------------------------------------------------------

ReplicaResult Trainer::run() {
  try {
    int epoch = static_cast<int>(resumed_.epochs_done);
    for (; epoch < spec_.epochs && !early_stop_.should_stop(epoch); ++epoch) run_epoch(epoch);
    if (epoch < spec_.epochs) stopped_early(epoch);
  } catch (...) {
    if (lead()) run_->append_steps(step_log_->take());  // the steps read before a divergence or failure
    throw;
  }
  restore_final_params();
  save_model();
  if (comm_) distributed::barrier(*comm_);
  return result_;
}

void Trainer::run_epoch(int epoch) {
  EpochTotals totals = start_epoch(epoch);
  train_steps(epoch, totals);
  runtime::synchronize(device_);
  const double epoch_s = seconds_since(this_epoch_->start);
  const runtime::HostLoad host = runtime::host_load_between(this_epoch_->host_start, runtime::sample_host());
  totals.comm_wait_s += sync_->take_comm_wait_s();
  const Evaluation test = evaluate_epoch_model();
  const EpochSums sums = reduce_sums(epoch, totals, test);
  // A run resumed from a stop in the epoch's last step has nothing left of it to audit.
  if (this_epoch_->first_step < steps_)
    audits_.run([&] { check_gradients_and_updates(named_, this_epoch_->snapshot, sync_->received_grad(), epoch + 1); });
  rundir::EpochRecord rec = epoch_record(epoch, epoch_s, totals, sums, test.drift);
  rec.host_cpu_wait_pct = host.cpu_wait_pct;
  rec.host_steal_pct = host.steal_pct;
  audits_.run([&] { check_loss_is_cross_entropy(rec.train_loss, rec.train_acc, epoch + 1); });
  rec.audit_warnings = audits_.take();  // debug.audits warn: rank 0 records its own findings
  if (lead()) {
    run_->append_steps(step_log_->take());
    run_->append(rec);
    observer_->on_epoch(rec);
  }
  check_not_blown_up(rec);
  select_epoch(rec);
  result_.epochs_done = epoch + 1;
  result_.final_test_acc = rec.test_acc;
  result_.final_train_loss = rec.train_loss;
  maybe_checkpoint(epoch, totals);
}

// The accumulators start from zero, or from the checkpoint's partial metrics when resuming inside
// this epoch (rank 0 holds the summed train metrics of all ranks).
EpochTotals Trainer::start_epoch(int epoch) {
  const bool partial = epoch == resumed_.epochs_done && resumed_.step_in_epoch > 0;
  this_epoch_.emplace(device_);
  this_epoch_->first_step = partial ? resumed_.step_in_epoch : 0;
  model_->train();
  sync_->reset_received();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params_) this_epoch_->snapshot.push_back(p.detach().clone());
  }
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  const bool restore_partial = partial && lead();
  EpochTotals totals;
  totals.loss_sum = torch::full({}, restore_partial ? resumed_.loss_sum : 0.0, f64);
  totals.correct =
      torch::full({}, restore_partial ? static_cast<int64_t>(resumed_.correct) : 0, f64.dtype(torch::kInt64));
  totals.grad_norm_sum = partial ? resumed_.grad_norm_sum : 0;
  totals.comm_wait_s = partial ? resumed_.comm_wait_s : 0;
  // The record's lr is the last step's: already taken if a stop came in the epoch's last step.
  totals.lr =
      this_epoch_->first_step > 0 ? schedule_(epoch + static_cast<double>(this_epoch_->first_step - 1) / steps_) : 0;
  totals.comm_bytes = partial ? resumed_.comm_bytes : 0;
  this_epoch_->start = Clock::now() - as_duration(partial ? resumed_.epoch_elapsed_s : 0.0);
  this_epoch_->host_start = runtime::sample_host();
  loader_->start_epoch(epoch, this_epoch_->first_step);
  step_log_->start_epoch(epoch, this_epoch_->first_step, partial ? resumed_.loss_sum : 0.0,
                         partial ? resumed_.correct : 0.0);
  return totals;
}

void Trainer::train_steps(int epoch, EpochTotals& totals) {
  for (int64_t step = this_epoch_->first_step; step < steps_; ++step, ++global_step_) {
    if (!mover_->staged()) stage_next(step);
    auto [batch_x, batch_y] = mover_->take();
    if (step + 1 < steps_) stage_next(step + 1);
    inject_fault();
    if (train_step(epoch, step, batch_x, batch_y, totals)) stop_cleanly(epoch, step, totals);
    report_step(epoch, step, totals);
  }
}

void Trainer::stage_next(int64_t step) {
  auto batch = loader_->next();
  TORCH_INTERNAL_ASSERT(batch.has_value(), "loader ended after ", step, " of ", steps_, " steps");
  mover_->stage(batch->x, batch->y);
}

// Debug faults fire on rank debug.rank at global step debug.step, never in a resumed attempt.
bool Trainer::fault_now() const {
  return faults_armed_ && rank_ == spec_.debug.rank && global_step_ == spec_.debug.step;
}

void Trainer::inject_fault() {
  if (spec_.debug.has(config::Fault::kCrash) && fault_now()) std::raise(SIGKILL);
  if (spec_.debug.has(config::Fault::kThrow) && fault_now())
    throw std::runtime_error(fmt::format("injected fault (debug.fault=throw) at step {}", global_step_));
}

// One optimizer step; returns whether the replicas agreed to stop after it.
bool Trainer::train_step(int epoch, int64_t step, const at::Tensor& batch_x, const at::Tensor& batch_y,
                         EpochTotals& totals) {
  totals.lr = schedule_(epoch + static_cast<double>(step) / steps_);
  set_lr(*optimizer_, totals.lr);
  const bool reduce = replica_sync_->reduces_gradients(global_step_);
  sync_->set_require_sync(reduce);
  fault_stop_ = fault_stop_ || (spec_.debug.has(config::Fault::kStop) && fault_now());
  const bool stop_wanted = StopSignals::last() != 0 || fault_stop_;
  sync_->request_stop(stop_wanted);
  broadcast_buffers();
  compute_gradients(batch_x, batch_y, reduce, totals);
  const at::Tensor grad_sq = sync_->grad_norm_squared();  // of the reduced gradient
  if (reduce && replicas() > 1) account_reduction(grad_sq, totals);
  this_epoch_->readback.push(torch::cat({grad_sq.reshape({1}), sync_->stop_flag()}).to(torch::kFloat64));
  this_epoch_->unread.push_back({global_step_, totals.lr, !reduce && size_ > 1});
  if (spec_.debug.has(config::Fault::kUpdateFirstOnly))
    for (size_t i = 1; i < params_.size(); ++i) params_[i].mutable_grad() = at::Tensor();
  optimizer_->step();
  if (weight_ema_) weight_ema_->update(params_, global_step_, floating(buffers_));
  bool stop = false;
  while (this_epoch_->readback.pending() > (step + 1 < steps_ ? 1 : 0)) stop = read_step(epoch, totals) || stop;
  log_interval(step, totals);
  const auto synced = replica_sync_->after_step(global_step_, {stop_wanted, local_divergence_.has_value()});
  if (synced.diverged) diverge_agreed(epoch);
  stop = stop || synced.stop;
  totals.comm_bytes += synced.bytes;
  if (audit_pending_ && comm_ && replica_sync_->replicas_agree_after(global_step_)) {
    audits_.run([&] { check_replica_consistency(*comm_, named_, epoch, "parameter"); });
    audit_pending_ = false;
  }
  return stop;
}

// Forward and backward of this process's replica, or of each simulated replica on its shard.
void Trainer::compute_gradients(const at::Tensor& batch_x, const at::Tensor& batch_y, bool reduce,
                                EpochTotals& totals) {
  if (sim_) sim_->begin_step();
  const int64_t shard = spec_.per_replica_batch;
  for (size_t k = 0; k < local_replicas_.size(); ++k) {
    auto x = sim_ ? batch_x.narrow(0, static_cast<int64_t>(k) * shard, shard) : batch_x;
    auto y = sim_ ? batch_y.narrow(0, static_cast<int64_t>(k) * shard, shard) : batch_y;
    if (sim_) sim_->begin_replica(static_cast<int>(k));
    accumulate_gradients(x, y, reduce, totals);
    if (sim_) sim_->end_replica(static_cast<int>(k));
  }
  if (sim_) sim_->end_step(&*sync_);
}

// batch.accumulate_steps micro-batches of one replica's shard, as a DDP no_sync() loop: every
// backward adds its gradient of loss / K to the buckets and only the last one all-reduces the sum
// (if this step reduces at all: local SGD and EASGD steps keep local gradients).
void Trainer::accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals) {
  const int64_t micro = x.size(0) / spec_.accumulate_steps;
  for (int64_t m = 0; m < spec_.accumulate_steps; ++m) {
    sync_->set_require_sync(reduce && m + 1 == spec_.accumulate_steps);
    sync_->prepare_for_backward(/*accumulate=*/m > 0);
    const auto xm = x.narrow(0, m * micro, micro), ym = y.narrow(0, m * micro, micro);
    const auto [logits, loss] = forward_backward(xm, ym);
    torch::NoGradGuard no_grad;
    totals.loss_sum += loss.detach().to(torch::kFloat64) * ym.size(0);
    totals.correct += (logits.argmax(1) == ym).sum();
  }
}

// Returns the logits and the mean loss; the gradient (of loss / batch.accumulate_steps) is in the
// buckets, and reduced if this backward syncs (GradSync), when it returns.
std::pair<at::Tensor, at::Tensor> Trainer::forward_backward(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor logits, loss;
  {
    AutocastScope autocast(device_.type(), bf16());
    logits = model_->forward(x);
    loss = compute_loss(logits, y, at::Reduction::Mean);
  }
  (spec_.accumulate_steps > 1 ? loss / static_cast<double>(spec_.accumulate_steps) : loss).backward();
  sync_->finalize();
  return {logits, loss};
}

// Cross-entropy, or under debug fault one_sided_sigmoid_loss the seed's one-sided loss.
at::Tensor Trainer::compute_loss(const at::Tensor& logits, const at::Tensor& y, int64_t reduction) const {
  return spec_.debug.has(config::Fault::kOneSidedSigmoidLoss) ? one_sided_sigmoid_loss(logits, y, reduction)
                                                              : cross_entropy(logits, y, reduction);
}

// The noise scale and traffic of a step whose gradients were all-reduced over 2+ replicas.
void Trainer::account_reduction(const at::Tensor& grad_sq, EpochTotals& totals) {
  totals.comm_bytes += distributed::ring_allreduce_bytes(sync_->payload_bytes(), replicas());
  // |mean gradient|^2: the reduced gradient is N times it under reduce "sum".
  const auto mean_sq = sync_options_.mean ? grad_sq : grad_sq / (static_cast<double>(replicas()) * replicas());
  // Under sync_bn a replica's gradient is not that of B/N independent samples (SyncBatchNorm's
  // backward sums the statistics' gradients over the replicas): the estimator's assumption fails,
  // so nothing is measured (docs/ddp-semantics.md).
  if (!spec_.model.sync_bn)
    noise_scale_.update(sim_ ? sim_->local_norm_squared_mean() : sync_->local_norm_squared_mean(), mean_sq);
}

// Reads the oldest pushed step: a NaN or Inf gradient norm diverges the run (a local one at the
// next agreement, diverge_agreed()). Returns whether the replicas agreed to stop after that step.
bool Trainer::read_step(int epoch, EpochTotals& totals) {
  const auto values = this_epoch_->readback.pop();
  const Unread at = this_epoch_->unread.front();
  this_epoch_->unread.pop_front();
  const double grad_norm = std::sqrt(values[0]);
  if (!std::isfinite(grad_norm)) {
    Diverged diverged(fmt::format("diverged at epoch {}, step {}: the {}gradient norm is {} (lr {:g})", epoch + 1,
                                  at.step, at.local ? fmt::format("local (rank {}) ", rank_) : "",
                                  std::isnan(grad_norm) ? "NaN" : "Inf", at.lr),
                      epoch + 1, at.step);
    if (!at.local) throw diverged;
    if (!local_divergence_) local_divergence_ = diverged;
    return values[1] > 0;
  }
  totals.grad_norm_sum += grad_norm;
  return values[1] > 0;
}

// log.every_steps: when an interval closes, the epoch's training sums are all-reduced on the
// device (every rank) and rank 0 reads them back when the next interval closes, or at once at the
// epoch's end, where the host waits anyway.
void Trainer::log_interval(int64_t step, const EpochTotals& totals) {
  if (!step_log_->closes_interval(step)) return;
  auto sums = torch::stack({totals.loss_sum, totals.correct.to(torch::kFloat64)});
  if (comm_) distributed::allreduce_sum(*comm_, sums);
  if (!lead()) return;
  while (this_epoch_->step_readback.pending() > 0) read_interval();
  this_epoch_->step_readback.push(sums);
  step_log_->close(step, global_step_ + 1, totals.lr, seconds_since(train_start_));
  if (step + 1 == steps_) read_interval();
}

void Trainer::read_interval() {
  const auto sums = this_epoch_->step_readback.pop();
  step_log_->read(sums[0], sums[1]);
}

// A clean stop closes the open interval with the stop's all-reduced partial sums, and rank 0
// writes the records before the checkpoint, so a resumed run goes on from the stop's step.
void Trainer::close_interval_at_stop(int64_t step, double lr, double loss_sum, double correct, double wall_s) {
  if (!lead() || !step_log_->enabled()) return;
  while (this_epoch_->step_readback.pending() > 0) read_interval();
  if (!step_log_->closes_interval(step)) {
    step_log_->close(step, global_step_ + 1, lr, wall_s);
    step_log_->read(loss_sum, correct);
  }
  run_->append_steps(step_log_->take());
}

// Every rank throws at the same agreement point: the rank that diverged names its own step.
void Trainer::diverge_agreed(int epoch) {
  if (local_divergence_) throw *local_divergence_;
  throw Diverged(fmt::format("diverged by epoch {}, step {}: another replica's local gradient norm was NaN or Inf "
                             "(agreed at the first averaging point or epoch end after it)",
                             epoch + 1, global_step_),
                 epoch + 1, global_step_);
}

// A clean stop after `step`: the checkpoint holds the partial epoch, then Interrupted is thrown.
void Trainer::stop_cleanly(int epoch, int64_t step, EpochTotals& totals) {
  while (this_epoch_->readback.pending() > 0) read_step(epoch, totals);
  totals.comm_wait_s += sync_->take_comm_wait_s();
  const int sig = StopSignals::last() != 0 ? StopSignals::last() : SIGTERM;
  const double wall_s = seconds_since(train_start_);
  auto partial_sums = torch::stack({totals.loss_sum, totals.correct.to(torch::kFloat64)}).cpu();
  if (comm_) distributed::allreduce_sum(*comm_, partial_sums);
  PartialEpoch partial;
  partial.steps_done = step + 1;
  partial.loss_sum = partial_sums[0].item<double>();
  partial.correct = partial_sums[1].item<double>();
  partial.elapsed_s = seconds_since(this_epoch_->start);
  close_interval_at_stop(step, totals.lr, partial.loss_sum, partial.correct, wall_s);
  write_checkpoint(make_checkpoint_state(epoch, global_step_ + 1, wall_s, totals, partial));
  throw Interrupted(fmt::format("stopped by {} after step {} (epoch {})", strsignal(sig), global_step_ + 1, epoch + 1),
                    sig);
}

void Trainer::broadcast_buffers() {
  if (comm_ && !buffers_.empty()) distributed::broadcast_coalesced(*comm_, buffers_, 0);
}

// ---- The end of an epoch ------------------------------------------------------------------------

// Local SGD / EASGD: evaluate the replicas' mean / the center; weight EMA: the average. Then go on
// training from the replica's own parameters.
Trainer::Evaluation Trainer::evaluate_epoch_model() {
  auto view = replica_sync_->epoch_view();
  if (weight_ema_) {
    TORCH_INTERNAL_ASSERT(!view, "config refuses model.ema_decay with local SGD / EASGD");
    view = ReplicaSync::EpochView{};
    view->eval_params = clone_all(weight_ema_->averages());
  }
  std::vector<at::Tensor> own_params, own_buffers;
  if (view) {
    own_params = clone_all(params_);
    copy_all(params_, view->eval_params);
  }
  // The average is evaluated with its own BatchNorm statistics (weight_ema.h).
  const std::vector<at::Tensor> stats = weight_ema_ ? floating(buffers_) : std::vector<at::Tensor>{};
  if (!stats.empty()) {
    own_buffers = clone_all(stats);
    copy_all(stats, weight_ema_->buffer_averages());
  }
  Evaluation test = evaluate();
  if (!stats.empty()) {
    final_buffers_ = clone_all(stats);
    copy_all(stats, own_buffers);
  }
  if (view) {
    copy_all(params_, own_params);
    final_params_ = std::move(view->eval_params);
    if (!weight_ema_) test.drift = view->drift;
  }
  return test;
}

// Exact test metrics of this process's shards of the test set (rank 0's BatchNorm statistics).
Trainer::Evaluation Trainer::evaluate() {
  model_->eval();
  broadcast_buffers();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(device_.type(), bf16());
  Evaluation e{evaluate_set(data_->test, test_samples()), std::nullopt, std::nullopt};
  if (data_->validation.size() > 0) e.validation = evaluate_set(data_->validation, data_->validation.size());
  return e;
}

// The first `samples` of `set`, this process's replicas' slices of them.
Trainer::SetSums Trainer::evaluate_set(const data::Dataset& set, int64_t samples) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  SetSums sums{torch::zeros({}, f64), torch::zeros({}, f64.dtype(torch::kInt64))};
  for (int r : local_replicas_) {
    const auto [begin, end] = data::eval_shard(samples, r, replicas());
    for (int64_t b = begin; b < end; b += 1000) {
      auto idx = torch::arange(b, std::min(b + 1000, end), torch::kInt64);
      auto batch = data::make_batch(set, idx, *transform_, /*train=*/false);
      batch.x = batch.x.to(device_);
      batch.y = batch.y.to(device_);
      auto logits = model_->forward(batch.x);
      sums.loss_sum += compute_loss(logits, batch.y, at::Reduction::Sum).to(torch::kFloat64);
      sums.correct += (logits.argmax(1) == batch.y).sum();
    }
  }
  return sums;
}

// The test samples evaluated: the first half only under debug fault eval_first_half.
int64_t Trainer::test_samples() const {
  const int64_t n = data_->test.size();
  return spec_.debug.has(config::Fault::kEvalFirstHalf) ? n / 2 : n;
}

// The epoch's train and test metrics summed over all replicas, then the replica audit (both
// collectives, in this order on every rank).
EpochSums Trainer::reduce_sums(int epoch, const EpochTotals& totals, const Evaluation& test) {
  const auto diverged = torch::full({}, local_divergence_ ? 1.0 : 0.0, totals.loss_sum.options());
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
    for (size_t i = 0; i < named_.size(); ++i) center.emplace_back(named_[i].first, c[i]);
    audits_.run([&] { check_replica_consistency(*comm_, center, epoch + 1, "EASGD center variable of parameter"); });
  } else if (replica_sync_->replicas_agree_after(global_step_ - 1)) {
    audits_.run([&] { check_replica_consistency(*comm_, named_, epoch + 1, "parameter"); });
  } else {
    audit_pending_ = true;
  }
}

rundir::EpochRecord Trainer::epoch_record(int epoch, double epoch_s, const EpochTotals& totals, const EpochSums& sums,
                                          std::optional<double> drift) const {
  EpochContext context;
  context.epoch = epoch + 1;
  context.global_step = global_step_;
  context.steps = steps_;
  context.global_batch = spec_.global_batch;
  context.test_samples = test_samples();
  context.val_samples = data_->validation.size();
  context.replicas = replicas();
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
  if (rec.val_loss && early_stop_.improved(rec) && lead()) save_best();
}

// The model the epoch evaluated (local SGD / EASGD / weight EMA: the average), then training's own.
void Trainer::save_best() {
  std::vector<at::Tensor> own_params, own_buffers;
  const std::vector<at::Tensor> stats = floating(buffers_);
  if (!final_params_.empty()) own_params = clone_all(params_);
  if (!final_buffers_.empty()) own_buffers = clone_all(stats);
  restore_final_params();
  save_module(rundir::best_model_file(options_.run_dir), *model_);
  if (!own_params.empty()) copy_all(params_, own_params);
  if (!own_buffers.empty()) copy_all(stats, own_buffers);
}

// early_stop.patience ran out: the run ends here, done; the manifest says why it has fewer epochs.
void Trainer::stopped_early(int epochs_done) {
  if (!lead()) return;
  const auto best = early_stop_.best_epoch().value_or(0);
  run_->update_manifest({{"early_stop",
                          {{"epochs_done", epochs_done},
                           {"best_epoch", best},
                           {"metric", config::name(spec_.early_stop.metric)},
                           {"best", early_stop_.best()}}}});
  observer_->on_note(fmt::format("stopped early after epoch {}: {} has not improved on epoch {}'s {:.4f} for {} epochs",
                                 epochs_done, config::name(spec_.early_stop.metric), best, early_stop_.best(),
                                 epochs_done - best));
}

void Trainer::maybe_checkpoint(int epoch, const EpochTotals& totals) {
  const int every = spec_.checkpoint.every_epochs;
  if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == spec_.epochs)
    write_checkpoint(make_checkpoint_state(epoch, global_step_, seconds_since(train_start_), totals, std::nullopt));
}

// Local SGD / EASGD over processes: every replica holds weights and momentum of its own.
bool Trainer::replicas_differ() const {
  return comm_ && size_ > 1 && replica_sync_->method() != config::SyncMethod::kAllreduce;
}

// Every rank's replica_state_blob, on every rank (blobs of unequal length are padded for the
// all-gather and cut back).
std::vector<at::Tensor> Trainer::gather_replica_states() {
  const at::Tensor blob = replica_state_blob(*model_, *optimizer_);
  const auto sizes = distributed::allgather(*comm_, torch::tensor({blob.numel()}, torch::kInt64));
  int64_t longest = 0;
  for (const auto& n : sizes) longest = std::max(longest, n.item<int64_t>());
  auto padded = torch::zeros({longest}, torch::kUInt8);
  padded.narrow(0, 0, blob.numel()).copy_(blob);
  auto blobs = distributed::allgather(*comm_, padded);
  for (size_t r = 0; r < blobs.size(); ++r) blobs[r] = blobs[r].narrow(0, 0, sizes[r].item<int64_t>());
  return blobs;
}

// Every rank takes part (the RNG states are gathered); rank 0 writes the file.
void Trainer::write_checkpoint(CheckpointState state) {
  if (sim_) {
    state.rng_states = sim_->rng_states();
  } else {
    const at::Tensor rng = dropout_state();
    state.rng_states = comm_ ? distributed::allgather(*comm_, rng) : std::vector<at::Tensor>{rng};
  }
  state.gns_trace = noise_scale_.raw_trace();
  state.gns_grad_sq = noise_scale_.raw_grad_sq();
  state.gns_steps = noise_scale_.steps();
  state.easgd_center = replica_sync_->center();
  if (weight_ema_) state.weight_ema = weight_ema_->averages();
  if (weight_ema_) state.weight_ema_buffers = weight_ema_->buffer_averages();
  state.bucket_layout = sync_->rebuilt_layout();
  state.best_epoch = early_stop_.best_epoch().value_or(0);
  state.best_metric = early_stop_.best();
  if (replicas_differ()) state.replica_states = gather_replica_states();
  if (!lead()) return;
  save_checkpoint(checkpoint_file_, *model_, *optimizer_, state);
  const rundir::CheckpointMark mark{state.epochs_done, state.step_in_epoch, state.global_step, state.records,
                                    rundir::utc_now()};
  run_->update_manifest({{"checkpoint", mark.to_json()}});
}

// Local SGD / EASGD / weight EMA: the saved model is the one the last epoch evaluated.
void Trainer::restore_final_params() {
  if (!final_params_.empty()) copy_all(params_, final_params_);
  if (!final_buffers_.empty()) copy_all(floating(buffers_), final_buffers_);
}

void Trainer::save_model() {
  if (!lead()) return;
  model_->to(torch::kCPU);
  save_module(rundir::model_file(options_.run_dir), *model_);
}

// ---- Observer ----------------------------------------------------------------------------------

void Trainer::report_step(int epoch, int64_t step, const EpochTotals& totals) {
  StepProgress p;
  p.epoch = epoch;
  p.step = step;
  p.steps = steps_;
  p.epoch_elapsed_s = seconds_since(this_epoch_->start);
  p.loss_sum = totals.loss_sum;
  // Rank 0 of a run resumed inside this epoch starts from the checkpoint's sums over all replicas.
  const bool restored = lead() && this_epoch_->first_step > 0 && epoch == resumed_.epochs_done;
  p.restored_loss_sum = restored ? resumed_.loss_sum : 0.0;
  p.samples = static_cast<double>((step + 1 - this_epoch_->first_step) * spec_.per_replica_batch) *
              static_cast<double>(local_replicas_.size());
  observer_->on_step(p);
}

double Trainer::seconds_since(Clock::time_point t) const {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace ddplab::train
