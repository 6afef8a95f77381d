// Gradient synchronization as DistributedDataParallel's reducer does it
// (torch/csrc/distributed/c10d/reducer.hpp), for CPU and CUDA tensors alike: the parameters'
// gradients packed into flat buckets that every .grad is a view into, each bucket handed to the
// comm hook (comm_hook.h) as soon as backward has filled it. docs/architecture.md ("Gradient sync,
// as DDP's reducer") says how buckets are built, launched, rebuilt and what the last bucket's
// extra slots carry; docs/ddp-semantics.md where it differs from DDP.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ddplab/distributed/agreement.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/comm_hook.h"
#include "ddplab/runtime/device.h"

namespace ddplab::distributed {

struct GradReducerOptions {
  // Bucket caps in MiB: the first bucket's (DDP's kDefaultFirstBucketBytes), then every other's
  // (replicas.bucket_mb, DDP's bucket_cap_mb).
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  // kMean divides each launched bucket by the world size before its hook (as DDP); kSum adds.
  config::Reduce reduce = config::Reduce::kMean;
  // Rebuild the buckets once, after the first step, in the order gradients arrived on rank 0 (as
  // DDP); only with a Comm.
  bool rebuild_buckets = true;
  // How buckets travel: the hook make_comm_hook() makes (from replicas.grad_dtype and
  // .compression: train::builtin_comm_hook()); `powersgd` is read under kPowerSgd only.
  BuiltinCommHook comm_hook = BuiltinCommHook::kAllreduce;
  PowerSgdOptions powersgd;
};

// |mean over `replicas` replicas of their local gradients|^2 from the reduced gradient's squared
// norm `reduced_sq` (a 0-dim tensor): itself under kMean, divided by N^2 under kSum (a new tensor).
at::Tensor mean_grad_norm_squared(const at::Tensor& reduced_sq, config::Reduce reduce, int replicas);

class GradReducer {
 public:
  // `params` in registration order (module.parameters()), each tensor once (tied weights
  // deduplicated first, as DDP does); `comm` null for one replica (the same buckets, no
  // collectives). Builds the buckets and installs a post-accumulate-grad hook per trainable
  // parameter (removed by the destructor).
  GradReducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, GradReducerOptions options = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Before each backward: zeroes the buckets and points every .grad at its bucket view.
  // accumulate = true keeps what the buckets hold and adds the next backward to it (DDP's
  // no_sync() accumulation); the control slots start afresh either way.
  void prepare_for_backward(bool accumulate = false);
  // After backward: launches any bucket not yet launched and waits for all (on CUDA the compute
  // stream waits, not the host); leaves the reduced gradient in every .grad, undefined for a
  // parameter no replica used.
  void finalize();
  // DDP's require_backward_grad_sync (default true): false fills the buckets but reduces nothing
  // (local SGD and EASGD between averaging points); no stop is agreed then.
  void set_require_sync(bool sync) { require_sync_ = sync; }
  // Before prepare_for_backward(): this rank asks to stop after the step (default false).
  void request_stop(bool stop) { stop_requested_ = stop; }
  // After finalize(): 1 element, > 0 when any rank asked (or the one replica did); 0 after a
  // no_sync step. No host sync; may view the last bucket, valid until prepare_for_backward().
  const at::Tensor& stop_flag() const { return stop_flag_; }

  // Squared L2 norm of the gradient in the buckets (after finalize(): the reduced one), 0-dim, no
  // host sync.
  at::Tensor grad_norm_squared() const;
  // After a reduced finalize(): mean over replicas of each one's |local gradient|^2 (0-dim, no
  // host sync; the noise scale's |G_small|^2); undefined after a step that reduced nothing.
  const at::Tensor& local_norm_squared_mean() const { return local_sq_mean_; }
  // Seconds finalize() stood waiting for the hooks since the last call (on CUDA: the compute
  // stream's stall, from events; this call waits for the device).
  double take_comm_wait_s() { return timer_.take_seconds(); }
  // Bytes all-reduced per step: each bucket's CommHook::payload_bytes().
  int64_t payload_bytes() const;

  // Replaces the hook the options name, as DDP's register_comm_hook; before the first backward.
  void register_comm_hook(std::unique_ptr<CommHook> hook);
  // This rank's hook state for a checkpoint (CommHook::save_state(); undefined for a stateless
  // hook), and loading it into a resumed run after restore_layout().
  at::Tensor comm_hook_state() const { return hook_->save_state(); }
  void load_comm_hook_state(const at::Tensor& state) { hook_->load_state(state); }
  // The rebuilt buckets' parameter order (bucket 0's first); empty before the rebuild. A
  // checkpoint keeps it so that a resumed run sums in the same places (a ring all-reduce of 3+
  // ranks adds an element in an order set by its place in its bucket).
  std::vector<int64_t> rebuilt_layout() const;
  // Builds the buckets in `order` (a rebuilt_layout()) and skips the rebuild; ddplab::Error when
  // it is not a permutation of the trainable parameters.
  void restore_layout(const std::vector<int64_t>& order);
  // Parameter indices (into `params`) of each bucket, in bucket order.
  std::vector<std::vector<size_t>> bucket_layout() const;

  // Parameter `param`'s view in its bucket, shaped as the parameter: where its .grad points and
  // grad_norm_squared() reads (simulated replicas write their sum there).
  at::Tensor grad_view(size_t param) const;
  // Per parameter: whether its hook fired since the last reset_received() (the gradient audit).
  const std::vector<bool>& received_grad() const { return received_; }
  void reset_received();
  // After a replay of a captured step (runtime::StepGraph; one replica): marks as received what
  // the captured backward used, as its hooks would have.
  void note_replayed_step();

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    int64_t grad_numel = 0;  // flat holds grad_numel gradients (+ extra_slots() in the last bucket)
    at::Tensor flat;
    // Views of flat made once per layout, so that no step dispatches an operator per parameter:
    // each parameter's gradient (shaped as it), all gradients, and in the last bucket the control
    // slots and the used flags (undefined in the others).
    std::vector<at::Tensor> grad_views;
    at::Tensor grads, control, used_flags;
    size_t pending = 0;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;  // the hook's, since its launch
  };

  // The last bucket's extra slots: the control slots (stop, local squared norm), then one used
  // flag per parameter.
  int64_t extra_slots() const { return slots_.size() + static_cast<int64_t>(params_.size()); }
  BucketView bucket_view(size_t b) const;
  std::vector<size_t> unused_by_all() const;
  bool reducing() const { return comm_ != nullptr && comm_->size > 1 && require_sync_; }
  void build_buckets(const std::vector<size_t>& order);
  void mark_ready(size_t param);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  void maybe_rebuild();

  std::vector<at::Tensor> params_;
  std::shared_ptr<Comm> comm_;
  GradReducerOptions options_;
  ControlSlots slots_{{/*diverged=*/false, /*local_norm=*/true}};
  std::unique_ptr<CommHook> hook_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;     // param -> bucket
  std::vector<int64_t> index_in_;  // param -> position in its bucket
  size_t next_bucket_ = 0;
  std::vector<bool> received_;
  std::vector<bool> used_;       // per parameter: its hook fired since the buckets were zeroed
  std::vector<size_t> arrival_;  // first-iteration arrival order
  bool rebuilt_ = false;
  int64_t steps_ = 0;
  bool stop_requested_ = false;
  at::Tensor stop_flag_;
  at::Tensor no_stop_;  // the stop_flag() of no_sync steps
  bool require_sync_ = true;
  bool reduced_ = false;
  at::Tensor local_sq_;         // running sum of this replica's launched buckets' squared norms
  at::Tensor local_sq_mean_;    // after a reduced finalize(): mean over replicas of local_sq_
  runtime::StreamTimer timer_;  // finalize()'s wait
};

}  // namespace ddplab::distributed
