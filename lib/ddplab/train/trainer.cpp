#include "ddplab/train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <csignal>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "ddplab/data/dataset.h"
#include "ddplab/data/loader.h"
#include "ddplab/data/transform.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/runtime/device.h"
#include "ddplab/distributed/grad_sync.h"
#include "ddplab/train/noise_scale.h"
#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/models/models.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/lr_schedule.h"
#include "ddplab/train/optimizer.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/simulated.h"

namespace ddplab::train {
namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
}

using Clock = std::chrono::steady_clock;

// A failed audit is a bug in the training setup, found at run time: exit code 1, not a spec error.
class AuditFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_duration(double s) {
  int t = static_cast<int>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

// `what` names the tensors in the message ("parameter", "EASGD center variable of parameter").
void check_replica_consistency(distributed::Comm& comm, const std::vector<std::pair<std::string, at::Tensor>>& named,
                               int epoch, const std::string& what) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> sums;
  for (const auto& [name, p] : named) {
    auto d = p.detach().to(torch::kCPU, torch::kFloat64);
    sums.push_back(d.sum().reshape({1}));
    sums.push_back(d.pow(2).sum().reshape({1}));
  }
  auto local = torch::cat(sums);
  auto both = torch::cat({local, -local});
  distributed::allreduce_max(comm, both);
  auto n = local.numel();
  auto hi = both.narrow(0, 0, n), lo = -both.narrow(0, n, n);
  auto differs = (hi != lo).nonzero();
  if (differs.numel() > 0) {
    auto k = differs[0][0].item<int64_t>() / 2;
    throw AuditFailure("replica consistency audit failed after epoch " + std::to_string(epoch) + ": " + what + " '" +
                named[k].first + "' differs between replicas (checksums from " +
                std::to_string(lo[2 * k].item<double>()) + " to " + std::to_string(hi[2 * k].item<double>()) +
                "); the replicas do not share weights (was rank 0's model broadcast at start?)");
  }
}

// precision "bf16": autocast to bfloat16 on `device` for the scope's lifetime, as Python's
// `with torch.autocast(device_type, dtype=torch.bfloat16)`; the autocast weight-cast cache is
// cleared when the outermost scope ends, as Python's does.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, bool enabled) : device_(device), enabled_(enabled) {
    if (!enabled_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(device_);
    was_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// The model's input: what the transform makes (24x24 for tf_tutorial), train and eval alike.
models::InputShape input_shape(const data::Transform& transform, const data::DatasetPair& data) {
  const data::ImageSize image = transform.output_size();
  return {image.channels, image.height, image.width, data.num_classes};
}

// One step needs a whole global batch: the loader drops the last partial one, as drop_last=True.
void check_batch_fits(const config::ExperimentSpec& spec, const data::DatasetPair& data) {
  if (spec.global_batch > data.train.size())
    throw Error("/batch: the global batch " + std::to_string(spec.global_batch) + " (" +
                std::to_string(spec.replicas.count) + " x " + std::to_string(spec.per_replica_batch) +
                ") is larger than the " + std::to_string(data.train.size()) + " training samples" +
                (spec.dataset.train_limit > 0 ? " (dataset.train_limit)" : "") + "; not one step would run");
}

}  // namespace

void check_setup(const config::ExperimentSpec& spec, const data::DatasetPair& data) {
  check_batch_fits(spec, data);
  torch::NoGradGuard no_grad;
  const auto transform = data::make_transform(spec.dataset.augment, data);
  auto model = models::make_model(spec.model, input_shape(*transform, data));
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  make_optimizer(spec.optimizer, named);
}

bool loss_has_blown_up(double mean_train_loss, int64_t num_classes) {
  return !std::isfinite(mean_train_loss) || mean_train_loss > 100.0 * std::log(static_cast<double>(num_classes));
}

void install_stop_handlers() {
  g_stop_signal = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() { return g_stop_signal; }

ReplicaResult train_replica(const config::ExperimentSpec& spec, const distributed::World& world, const ReplicaOptions& options) {
  const int rank = world.rank, size = world.size;
  const bool lead = rank == 0;
  // N replicas: `size` processes, or one process simulating them (simulated.h).
  const bool simulated = spec.replicas.mode == config::ReplicaMode::kSimulated;
  const int replicas = simulated ? spec.replicas.count : size;
  TORCH_INTERNAL_ASSERT(!simulated || size == 1, "simulated replicas run in one process, got world size ", size);
  at::set_num_threads(spec.replicas.threads);
  data::DatasetPair loaded;
  if (options.data == nullptr) loaded = data::load_dataset(spec.dataset);
  const data::DatasetPair& data = options.data != nullptr ? *options.data : loaded;
  const auto transform = data::make_transform(spec.dataset.augment, data);
  const models::InputShape shape = input_shape(*transform, data);

  const bool skip_broadcast = spec.debug.fault == config::Fault::kSkipBroadcast;
  torch::manual_seed(static_cast<uint64_t>(spec.seed) + (skip_broadcast ? rank : 0));
  auto model = models::make_model(spec.model, shape);
  // CUDA: rank -> GPU local_rank. NCCL needs a GPU per rank; gloo may put several ranks on one GPU
  // (local_rank modulo the GPU count), which lets one GPU test N > 1. Without a CUDA build the
  // spec rejects device "cuda".
  torch::Device device(torch::kCPU);
  if (spec.replicas.device == config::Device::kCuda) {
    const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    if (gpus == 0 || (spec.replicas.backend == config::Backend::kNccl && gpus <= world.local_rank))
      throw Error("/replicas/device: cuda: local rank " + std::to_string(world.local_rank) + " needs GPU " +
                  std::to_string(world.local_rank) + ", but " + std::to_string(gpus) +
                  " GPU(s) are visible (NCCL needs one GPU per rank; backend gloo can share one)");
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank % gpus));
    runtime::select_device(device);
    model->to(device);
  }
  const bool bf16 = spec.precision == config::Precision::kBf16;

  std::shared_ptr<distributed::Comm> comm = options.comm;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(spec.replicas.timeout_s * 1000));
  if (size > 1) {
    if (!comm) comm = distributed::make_comm(world, spec.replicas.backend, timeout);
    std::vector<at::Tensor> state;
    for (auto& p : model->parameters()) state.push_back(p);
    for (auto& b : model->buffers()) state.push_back(b);
    if (!skip_broadcast) distributed::broadcast_coalesced(*comm, state, 0);
    if (spec.model.sync_bn) model->set_replica_sum([comm](at::Tensor& t) { distributed::allreduce_sum(*comm, t); });
  }
  // BatchNorm running statistics: rank 0's are broadcast before every training forward (DDP's
  // broadcast_buffers=True) and before evaluation, so every rank evaluates the model rank 0 saves.
  std::vector<at::Tensor> buffers;
  for (auto& b : model->buffers()) buffers.push_back(b);
  auto broadcast_buffers = [&] {
    if (comm && !buffers.empty()) distributed::broadcast_coalesced(*comm, buffers, 0);
  };
  // Each replica draws its own dropout masks, as separate DDP processes do.
  auto dropout_seed = [&](int r) { return static_cast<uint64_t>(spec.seed) * 1000003ULL + 1 + r; };
  torch::manual_seed(dropout_seed(rank));

  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  std::vector<at::Tensor> params;
  for (const auto& [name, p] : named) params.push_back(p);

  auto optimizer = make_optimizer(spec.optimizer, named);
  distributed::GradSyncOptions sync_options;
  sync_options.bucket_mb = spec.replicas.bucket_mb;
  sync_options.mean = spec.replicas.reduce == config::Reduce::kMean;
  sync_options.compress_bf16 = spec.replicas.grad_dtype == config::WireDtype::kBf16;
  distributed::GradSync sync(params, comm, sync_options);
  std::optional<SimulatedReplicas> sim;
  if (simulated) {
    std::vector<uint64_t> seeds;
    for (int r = 0; r < replicas; ++r) seeds.push_back(dropout_seed(r));
    sim.emplace(*model, params, seeds, sync_options.mean, device);
  }
  train::GradNoiseScale noise_scale(spec.per_replica_batch, spec.global_batch);

  // A simulating process loads the whole global batch and splits it into the replicas' shards.
  data::TrainLoader loader(data, transform, spec.global_batch, simulated ? 0 : rank, simulated ? 1 : size, spec.seed,
                           /*prefetch=*/4, /*pin_memory=*/device.is_cuda());
  runtime::BatchMover mover(device);  // on CUDA, batch k+1's copy overlaps step k
  check_batch_fits(spec, data);
  const int64_t steps = loader.steps_per_epoch();
  TORCH_INTERNAL_ASSERT(steps > 0, "no step in an epoch of ", data.train.size(), " samples");
  ReplicaSync replica_sync(spec.replicas.sync, steps, params, comm);
  LrSchedule schedule(spec.optimizer, spec.schedule, spec.global_batch, spec.epochs);
  std::optional<rundir::RunLog> run;  // only rank 0 writes the run directory
  if (lead) run = rundir::RunLog::open(options.run_dir);
  const bool tty = options.progress && lead && ::isatty(STDOUT_FILENO);
  // The replicas this process computes, and so the test shards it evaluates.
  std::vector<int> local_replicas;
  for (int r = simulated ? 0 : rank; r < (simulated ? replicas : rank + 1); ++r) local_replicas.push_back(r);

  // Dropout draws from the default generator of the device it runs on (Philox on CUDA).
  at::Generator dropout_generator =
      at::globalContext().defaultGenerator(device.is_cuda() ? device : c10::Device(c10::kCPU));
  auto dropout_state = [&] {
    std::lock_guard<std::mutex> lock(dropout_generator.mutex());
    return dropout_generator.get_state();
  };

  CheckpointState resumed;
  const auto checkpoint_file = rundir::checkpoint_file(options.run_dir);
  if (options.resume) {
    resumed = load_checkpoint(checkpoint_file, *model, *optimizer);
    const int64_t state_bytes = dropout_state().numel();
    if (static_cast<int>(resumed.rng_states.size()) == replicas && resumed.rng_states[0].numel() == state_bytes) {
      if (sim) {
        sim->set_rng_states(resumed.rng_states);
      } else {
        std::lock_guard<std::mutex> lock(dropout_generator.mutex());
        dropout_generator.set_state(resumed.rng_states[rank]);
      }
    } else if (lead) {
      std::cerr << "ddplab: note: the checkpoint holds " << resumed.rng_states.size() << " dropout generator states of "
                << (resumed.rng_states.empty() ? 0 : resumed.rng_states[0].numel()) << " bytes, this run has "
                << replicas << " replicas whose " << device.type() << " generators keep " << state_bytes
                << " bytes (another replica count or device); dropout streams restart from the seed" << std::endl;
    }
    noise_scale.set_state(resumed.gns_trace, resumed.gns_grad_sq, resumed.gns_steps);
    replica_sync.set_center(resumed.easgd_center);
  }
  const bool faults_armed = !options.resume;
  // Every rank takes part (the RNG states are gathered); rank 0 writes the file.
  auto write_checkpoint = [&](CheckpointState state) {
    if (sim) {
      state.rng_states = sim->rng_states();
    } else {
      const at::Tensor rng = dropout_state();
      state.rng_states = comm ? distributed::allgather(*comm, rng) : std::vector<at::Tensor>{rng};
    }
    state.gns_trace = noise_scale.raw_trace();
    state.gns_grad_sq = noise_scale.raw_grad_sq();
    state.gns_steps = noise_scale.steps();
    state.easgd_center = replica_sync.center();
    if (!lead) return;
    save_checkpoint(checkpoint_file, *model, *optimizer, state);
    run->update_manifest({{"checkpoint",
                           {{"epochs_done", state.epochs_done},
                            {"step_in_epoch", state.step_in_epoch},
                            {"global_step", state.global_step},
                            {"records", state.records},
                            {"time", rundir::utc_now()}}}});
  };

  ReplicaResult result;
  int64_t global_step = resumed.global_step;
  bool audit_pending = false;  // local SGD: check the replicas at their next agreement
  std::vector<at::Tensor> final_params;  // local SGD / EASGD: what the last epoch evaluated
  auto train_start = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(resumed.wall_s));
  for (int epoch = static_cast<int>(resumed.epochs_done); epoch < spec.epochs; ++epoch) {
    const bool partial = epoch == resumed.epochs_done && resumed.step_in_epoch > 0;
    const int64_t first_step = partial ? resumed.step_in_epoch : 0;
    model->train();
    sync.reset_received();
    std::vector<at::Tensor> snapshot;
    {
      torch::NoGradGuard no_grad;
      for (auto& p : params) snapshot.push_back(p.detach().clone());
    }
    auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    const bool restore_partial = partial && lead;
    auto loss_sum = torch::full({}, restore_partial ? resumed.loss_sum : 0.0, f64);
    auto correct =
        torch::full({}, restore_partial ? static_cast<int64_t>(resumed.correct) : 0, f64.dtype(torch::kInt64));
    double grad_norm_sum = partial ? resumed.grad_norm_sum : 0;
    double comm_wait = partial ? resumed.comm_wait_s : 0;
    // The record's lr is the last step's: already taken if a stop came in the epoch's last step.
    double lr = first_step > 0 ? schedule(epoch + static_cast<double>(first_step - 1) / steps) : 0;
    int64_t comm_bytes = partial ? resumed.comm_bytes : 0;
    auto epoch_start = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(partial ? resumed.epoch_elapsed_s : 0.0));
    auto last_progress = epoch_start;
    loader.start_epoch(epoch, first_step);
    // Each step's gradient norm and stop flag are read on the host one step late (on CUDA the
    // host then never waits for the step it just queued); the epoch's last step is read at once.
    runtime::HostReadback readback(device);
    std::deque<std::pair<int64_t, double>> unread;  // global step and lr of each value pushed
    // Returns whether the replicas agreed to stop after that step.
    auto read_step = [&] {
      const auto values = readback.pop();
      const auto [at_step, at_lr] = unread.front();
      unread.pop_front();
      const double grad_norm = std::sqrt(values[0]);
      if (!std::isfinite(grad_norm)) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "diverged at epoch %d, step %ld: the gradient norm is %s (lr %g)", epoch + 1,
                      static_cast<long>(at_step), std::isnan(grad_norm) ? "NaN" : "Inf", at_lr);
        throw Diverged(msg, epoch + 1, at_step);
      }
      grad_norm_sum += grad_norm;
      return values[1] > 0;
    };
    auto stage_next = [&](int64_t step) {
      auto batch = loader.next();
      TORCH_INTERNAL_ASSERT(batch.has_value(), "loader ended after ", step, " of ", steps, " steps");
      mover.stage(batch->x, batch->y);
    };
    for (int64_t step = first_step; step < steps; ++step, ++global_step) {
      if (!mover.staged()) stage_next(step);
      auto [batch_x, batch_y] = mover.take();
      if (step + 1 < steps) stage_next(step + 1);
      const bool fault_now = faults_armed && rank == spec.debug.rank && global_step == spec.debug.step;
      if (spec.debug.fault == config::Fault::kCrash && fault_now) std::raise(SIGKILL);
      if (spec.debug.fault == config::Fault::kThrow && fault_now)
        throw std::runtime_error("injected fault (debug.fault=throw) at step " + std::to_string(global_step));
      lr = schedule(epoch + static_cast<double>(step) / steps);
      set_lr(*optimizer, lr);
      const bool reduce = replica_sync.reduces_gradients(global_step);
      sync.set_require_sync(reduce);
      sync.request_stop(stop_signal() != 0 || (spec.debug.fault == config::Fault::kStop && fault_now));
      broadcast_buffers();
      if (sim) sim->begin_step();
      const int64_t shard = spec.per_replica_batch;
      for (size_t k = 0; k < local_replicas.size(); ++k) {
        auto x = sim ? batch_x.narrow(0, static_cast<int64_t>(k) * shard, shard) : batch_x;
        auto y = sim ? batch_y.narrow(0, static_cast<int64_t>(k) * shard, shard) : batch_y;
        if (sim) sim->begin_replica(static_cast<int>(k));
        sync.prepare_for_backward();
        at::Tensor logits, loss;
        {
          AutocastScope autocast(device.type(), bf16);
          logits = model->forward(x);
          loss = torch::cross_entropy_loss(logits, y);
        }
        loss.backward();
        sync.finalize();
        if (sim) sim->end_replica(static_cast<int>(k));
        torch::NoGradGuard no_grad;
        loss_sum += loss.detach().to(torch::kFloat64) * y.size(0);
        correct += (logits.argmax(1) == y).sum();
      }
      if (sim) sim->end_step();
      const at::Tensor grad_sq = sync.grad_norm_squared();  // of the reduced gradient
      if (reduce && replicas > 1) {
        comm_bytes += distributed::ring_allreduce_bytes(sync.payload_bytes(), replicas);
        // |mean gradient|^2: the reduced gradient is N times it under reduce "sum".
        const auto mean_sq = sync_options.mean ? grad_sq : grad_sq / (static_cast<double>(replicas) * replicas);
        noise_scale.update(sim ? sim->local_norm_squared_mean() : sync.local_norm_squared_mean(), mean_sq);
      }
      readback.push(torch::cat({grad_sq.reshape({1}), sync.stop_flag()}).to(torch::kFloat64));
      unread.emplace_back(global_step, lr);
      if (spec.debug.fault == config::Fault::kUpdateFirstOnly)
        for (size_t i = 1; i < params.size(); ++i) params[i].mutable_grad() = at::Tensor();
      optimizer->step();
      bool stop = false;
      while (readback.pending() > (step + 1 < steps ? 1 : 0)) stop = read_step() || stop;
      const auto synced = replica_sync.after_step(global_step, stop_signal() != 0);
      stop = stop || synced.stop;
      comm_bytes += synced.bytes;
      if (audit_pending && comm && replica_sync.replicas_agree_after(global_step)) {
        check_replica_consistency(*comm, named, epoch, "parameter");
        audit_pending = false;
      }
      if (stop) {
        while (readback.pending() > 0) read_step();
        comm_wait += sync.take_comm_wait_s();
        int sig = stop_signal() != 0 ? stop_signal() : SIGTERM;
        CheckpointState state;
        state.epochs_done = epoch;
        state.step_in_epoch = step + 1;
        state.global_step = global_step + 1;
        state.records = epoch;
        state.wall_s = seconds_since(train_start);
        // The partial train metrics are per rank: store their sum; rank 0 alone restores it.
        auto partial_totals = torch::stack({loss_sum, correct.to(torch::kFloat64)}).cpu();
        if (comm) distributed::allreduce_sum(*comm, partial_totals);
        state.loss_sum = partial_totals[0].item<double>();
        state.correct = partial_totals[1].item<double>();
        state.grad_norm_sum = grad_norm_sum;
        state.comm_wait_s = comm_wait;
        state.comm_bytes = comm_bytes;
        state.epoch_elapsed_s = seconds_since(epoch_start);
        write_checkpoint(state);
        throw Interrupted("stopped by " + std::string(strsignal(sig)) + " after step " +
                              std::to_string(global_step + 1) + " (epoch " + std::to_string(epoch + 1) + ")",
                          sig);
      }
      if (tty && seconds_since(last_progress) > 0.5) {
        last_progress = Clock::now();
        double el = seconds_since(epoch_start);
        double ips = (step + 1) * spec.global_batch / el;
        std::printf("\r  epoch %d/%d  step %ld/%ld  %.0f img/s  ETA %s   ", epoch + 1, spec.epochs,
                    static_cast<long>(step + 1), static_cast<long>(steps), ips,
                    format_duration(el / (step + 1) * (steps - step - 1)).c_str());
        std::fflush(stdout);
      }
    }
    runtime::synchronize(device);
    double epoch_s = seconds_since(epoch_start);
    comm_wait += sync.take_comm_wait_s();

    // Local SGD / EASGD: evaluate the replicas' mean / the center, then go on from the replica's own.
    auto view = replica_sync.epoch_view();
    std::vector<at::Tensor> own_params;
    if (view) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) {
        own_params.push_back(params[i].detach().clone());
        params[i].detach().copy_(view->eval_params[i]);
      }
    }
    model->eval();
    broadcast_buffers();
    auto test_loss_sum = torch::zeros({}, f64), test_correct = torch::zeros({}, f64.dtype(torch::kInt64));
    {
      torch::NoGradGuard no_grad;
      AutocastScope autocast(device.type(), bf16);
      for (int r : local_replicas) {
        const auto [test_begin, test_end] = data::eval_shard(data.test.size(), r, replicas);
        for (int64_t b = test_begin; b < test_end; b += 1000) {
          auto idx = torch::arange(b, std::min(b + 1000, test_end), torch::kInt64);
          auto batch = data::make_batch(data.test, idx, *transform, /*train=*/false);
          batch.x = batch.x.to(device);
          batch.y = batch.y.to(device);
          auto logits = model->forward(batch.x);
          test_loss_sum += torch::cross_entropy_loss(logits, batch.y, {}, at::Reduction::Sum).to(torch::kFloat64);
          test_correct += (logits.argmax(1) == batch.y).sum();
        }
      }
    }
    if (view) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(own_params[i]);
      final_params = std::move(view->eval_params);
    }
    auto totals = torch::stack({loss_sum, correct.to(torch::kFloat64), test_loss_sum,
                                test_correct.to(torch::kFloat64)}).cpu();
    if (comm) {
      distributed::allreduce_sum(*comm, totals);
      if (replica_sync.method() == config::SyncMethod::kEasgd) {
        std::vector<std::pair<std::string, at::Tensor>> center;
        const auto c = replica_sync.center();
        for (size_t i = 0; i < named.size(); ++i) center.emplace_back(named[i].first, c[i]);
        check_replica_consistency(*comm, center, epoch + 1, "EASGD center variable of parameter");
      } else if (replica_sync.replicas_agree_after(global_step - 1)) {
        check_replica_consistency(*comm, named, epoch + 1, "parameter");
      } else {
        audit_pending = true;
      }
    }
    // A run resumed from a stop in the epoch's last step has nothing left of it to audit.
    if (first_step < steps) {
      torch::NoGradGuard no_grad;
      const auto& got = sync.received_grad();
      for (size_t i = 0; i < params.size(); ++i) {
        if (!params[i].requires_grad()) continue;
        if (!got[i])
          throw AuditFailure("gradient audit failed in epoch " + std::to_string(epoch + 1) + ": parameter '" + named[i].first +
                      "' received no gradient (is it used in forward? is the loss connected to it?)");
        const auto& grad = params[i].grad();
        if (torch::equal(params[i], snapshot[i]) && grad.defined() && !grad.any().item<bool>())
          throw AuditFailure("update audit failed in epoch " + std::to_string(epoch + 1) + ": parameter '" +
                             named[i].first +
                             "' did not change: its gradients were exactly zero (constant inputs, such as all-zero "
                             "images? a layer whose ReLUs are all dead?)");
        if (torch::equal(params[i], snapshot[i]))
          throw AuditFailure("update audit failed in epoch " + std::to_string(epoch + 1) + ": parameter '" + named[i].first +
                      "' did not change although it received gradients; the optimizer did not update it (a "
                      "gradient-averaging loop that returns after the first variable?)");
      }
    }
    auto t = totals.accessor<double, 1>();
    const double train_n = static_cast<double>(steps * spec.global_batch);
    rundir::EpochRecord rec;
    rec.epoch = epoch + 1;
    rec.step = global_step;
    rec.lr = lr;
    rec.train_loss = t[0] / train_n;
    rec.train_acc = t[1] / train_n;
    rec.test_loss = t[2] / static_cast<double>(data.test.size());
    rec.test_acc = t[3] / static_cast<double>(data.test.size());
    rec.grad_norm = grad_norm_sum / steps;
    rec.epoch_s = epoch_s;
    rec.wall_s = seconds_since(train_start);
    rec.images_per_s = train_n / epoch_s;
    rec.comm_wait_s = comm_wait;
    // Noise scale: only while the gradients are all-reduced (not in local SGD / EASGD phases).
    if (noise_scale.available() && replica_sync.reduces_gradients(global_step - 1)) {
      rec.gns_trace_ema = noise_scale.trace_ema();
      rec.gns_grad_sq_ema = noise_scale.grad_sq_ema();
      rec.grad_noise_scale = noise_scale.b_simple();
    }
    rec.comm_bytes = comm_bytes;
    if (view) rec.replica_drift = view->drift;
    rec.replicas = replicas;
    rec.global_batch = spec.global_batch;
    if (lead) {
      run->append(rec);
      if (tty) std::printf("\r%80s\r", "");
      if (!options.quiet) {
        std::printf("epoch %d/%d  lr %.4g  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s  %.0f img/s",
                    rec.epoch, spec.epochs, rec.lr, rec.train_loss, 100 * rec.train_acc, rec.test_loss,
                    100 * rec.test_acc, rec.epoch_s, rec.images_per_s);
        if (size > 1) std::printf("  comm wait %.2f s", rec.comm_wait_s);
        if (rec.grad_noise_scale) std::printf("  B_simple %.0f", *rec.grad_noise_scale);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (loss_has_blown_up(rec.train_loss, data.num_classes)) {
      char msg[200];
      std::snprintf(msg, sizeof msg, "diverged in epoch %d: the mean training loss is %g, over 100 x ln(%ld) (lr %g)",
                    rec.epoch, rec.train_loss, static_cast<long>(data.num_classes), lr);
      throw Diverged(msg, rec.epoch, global_step);
    }
    result.epochs_done = epoch + 1;
    result.final_test_acc = rec.test_acc;
    result.final_train_loss = rec.train_loss;
    const int every = spec.checkpoint.every_epochs;
    if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == spec.epochs) {
      CheckpointState state;
      state.epochs_done = epoch + 1;
      state.global_step = global_step;
      state.records = epoch + 1;
      state.wall_s = seconds_since(train_start);
      write_checkpoint(state);
    }
  }
  if (!final_params.empty()) {
    // Local SGD / EASGD: the saved model is the one the last epoch evaluated.
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(final_params[i]);
  }
  if (lead) {
    const auto model_file = rundir::model_file(options.run_dir);
    const auto tmp = rundir::temp_file(model_file);
    model->to(torch::kCPU);
    torch::save(model, tmp.string());
    std::filesystem::rename(tmp, model_file);
  }
  if (comm) distributed::barrier(*comm);
  return result;
}

}  // namespace ddplab::train
