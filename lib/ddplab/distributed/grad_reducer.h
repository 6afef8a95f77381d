// Gradient synchronization as DistributedDataParallel's reducer does it
// (torch/csrc/distributed/c10d/reducer.cpp), for CPU and CUDA tensors alike.
//
// Buckets: parameters are taken in reverse registration order (roughly the order backward
// produces their gradients) and packed into flat buffers; the first bucket is capped at
// `first_bucket_mb` (1 MiB, DDP's kDefaultFirstBucketBytes), the others at `bucket_mb` (25).
// A bucket holds one dtype: as DDP's compute_bucket_assignment_by_size, each dtype fills buckets
// of its own, ordered by the first parameter each takes.
// Each parameter's .grad is a view into its bucket (DDP's gradient_as_bucket_view=True), so
// there is no copy and no allocation per step.
//
// Overlap: a post-accumulate-grad hook per parameter marks its gradient ready. When every
// gradient of a bucket is ready, the bucket (and any following ready ones) is all-reduced
// asynchronously at once, in bucket-index order on every rank, while backward goes on.
// finalize() makes the optimizer step wait for all of them; `mean` divides by the world
// size first (as DDP), `sum` adds.
//
// After the first step the buckets are rebuilt once in the order gradients actually arrived
// on rank 0 (broadcast, so every rank agrees), as DDP does. A parameter that received no
// gradient in a backward contributes zeros to its bucket, which is still reduced (no hang);
// if no replica used it (globally unused, as DDP's find_unused_parameters=True finds it) its
// .grad is left undefined after finalize(), so the optimizer skips it as torch.optim does a
// parameter whose .grad is None (no momentum or weight-decay step); used by any replica, it gets
// the reduced gradient. `received_grad()` reports the parameters this replica never used to the
// audits.
//
// The last bucket (the last to be reduced) carries extra floats after the gradients: the control
// slots (agreement.h's ControlSlots: stop, local norm), then one used slot per parameter. The
// used slots: 1 where this replica's backward reached the parameter (filled at launch, when every
// hook of the backward has fired: the last bucket launches last), so after the all-reduce a slot
// is > 0 where any replica used the parameter. They are read on the host only when this replica
// left a parameter unused (no host sync per step otherwise). The stop slot: request_stop() sets
// it before backward; after finalize(), stop_flag() is > 0 on every rank if any rank asked, so all
// ranks stop after the same step without an extra collective (clean stops on SIGINT/SIGTERM;
// ParamAverager agrees stops the same way at averaging points). The local norm slot: when a
// bucket is launched its local squared norm (this replica's gradient, before the all-reduce) is
// added to a running 0-dim tensor; the last bucket writes the total into the slot, so after
// finalize() it holds the mean over replicas of |local gradient|^2 (local_norm_squared_mean();
// the gradient noise scale's |G_small|^2, see noise_scale.h), again without an extra collective.
//
// How a launched bucket travels is its CommHook (comm_hook.h), DDP's register_comm_hook: by
// default allreduce_hook(), one all-reduce of the bucket. grad_dtype bf16 or fp16
// (replicas.grad_dtype) is cast_compress_hook(), DDP's bf16_compress_hook / fp16_compress_hook:
// the bucket is divided by the world size in fp32, its gradients cast into a persistent bfloat16
// (float16) buffer, all-reduced in that dtype (half the bytes), and cast back into the fp32
// bucket in finalize(). The extra slots of the last bucket are not gradients and stay fp32: they
// travel in a second, small fp32 all-reduce issued right after the last bucket's (bf16 would
// round the local squared norm that the noise scale magnifies; the stop flag would survive, but
// one path serves both). `powersgd` (replicas.compression "powersgd") is powersgd_hook(), DDP's
// powerSGD_hook; its extra slots travel in fp32 with the gradients it sends uncompressed.
//
// set_require_sync(false) is DDP's require_backward_grad_sync = False: buckets are filled but not
// reduced (local SGD and EASGD between their averaging points); no stop is agreed and no local
// norm is averaged then. DDP's no_sync() also leaves the gradients to accumulate over several
// backwards (DDP does not zero them; the user's zero_grad() does): here prepare_for_backward()
// zeroes the buckets unless given accumulate = true, so gradient accumulation is
//   set_require_sync(false); for k < K-1: prepare_for_backward(k > 0); backward; finalize();
//   set_require_sync(true);  prepare_for_backward(true); backward; finalize();  // reduces the sum
//
// Without a Comm (one replica) the same buckets and views are used, minus the collectives.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
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
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool mean = true;  // false: sum
  bool rebuild_buckets = true;
  config::WireDtype grad_dtype = config::WireDtype::kFp32;  // bf16, fp16: cast_compress_hook() (see above)
  std::optional<PowerSgdOptions> powersgd;                  // set: powersgd_hook() (grad_dtype fp32 only)
};

class GradReducer {
 public:
  // `params` in registration order (module.parameters()), each tensor once (tied weights
  // deduplicated first, as DDP does); `comm` may be null (one replica).
  GradReducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, GradReducerOptions options = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Zeroes the bucket buffers and points every .grad at its bucket view. Call before backward.
  // accumulate = true keeps the gradients the buckets hold (backwards since the last zeroing,
  // under set_require_sync(false)) and adds the next backward's to them, as DDP's no_sync(); the
  // control slots start afresh either way. A second backward needs a prepare_for_backward() first.
  void prepare_for_backward(bool accumulate = false);
  // Launches any bucket not yet launched and waits for all (on CUDA the compute stream waits;
  // the host does not).
  void finalize();
  // Seconds finalize() stood waiting for all-reduces since the last call (on CUDA: how long the
  // compute stream stood, from CUDA events; this call waits for the device).
  double take_comm_wait_s() { return timer_.take_seconds(); }

  const GradReducerOptions& options() const { return options_; }
  // Replaces how buckets travel (comm_hook.h; by default the hook the options name), as DDP's
  // register_comm_hook. Before the first backward.
  void register_comm_hook(std::unique_ptr<CommHook> hook);
  // This rank's comm hook state for a checkpoint (CommHook::save_state(); undefined when the hook
  // keeps none), and loading it into a resumed run, after restore_layout().
  at::Tensor comm_hook_state() const { return hook_->save_state(); }
  void load_comm_hook_state(const at::Tensor& state) { hook_->load_state(state); }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  // Parameter indices (into `params`) of bucket b, in bucket order.
  const std::vector<size_t>& bucket_params(int b) const { return buckets_[b].params; }
  // Gradient bytes of bucket b (the extra slots of the last bucket not counted).
  int64_t bucket_bytes(int b) const { return buckets_[b].grad_numel * buckets_[b].flat.element_size(); }
  // Bytes all-reduced per step: every bucket's gradients in the wire dtype, plus the extra slots
  // (always fp32).
  int64_t payload_bytes() const;
  // Squared L2 norm of the reduced gradient (a 0-dim tensor, no host sync).
  at::Tensor grad_norm_squared() const;
  // |mean over replicas of the local gradients|^2 whatever the reduction: grad_norm_squared(),
  // divided by N^2 under `sum` (a 0-dim tensor, no host sync).
  at::Tensor mean_grad_norm_squared() const;
  // Whether the last finalize() all-reduced (a Comm of size > 1 and require_sync).
  bool reduced() const { return reduced_; }
  // After a reduced finalize(): the mean over replicas of each replica's |local gradient|^2
  // (0-dim tensor, no host sync). Undefined after a step that was not reduced.
  const at::Tensor& local_norm_squared_mean() const { return local_sq_mean_; }

  // DDP's require_backward_grad_sync: false keeps every replica's local gradient (see above for
  // no_sync()'s accumulation).
  void set_require_sync(bool sync) { require_sync_ = sync; }
  // The order of the parameters in the buckets once rebuilt (bucket 0's first); empty before the
  // rebuild. A checkpoint keeps it and restore_layout() gives the resumed run the same buckets:
  // with 3+ ranks the ring all-reduce sums an element in an order that depends on where it sits
  // in its bucket, so a resumed run on the initial layout would drift in the last bits.
  std::vector<int64_t> rebuilt_layout() const;
  // Builds the buckets in `order` (rebuilt_layout() of a run of this model) and skips the rebuild.
  // Throws ddplab::Error when `order` is not a permutation of the trainable parameters.
  void restore_layout(const std::vector<int64_t>& order);
  // Parameter `param`'s place in its bucket, shaped as the parameter: what its .grad is between
  // prepare_for_backward() and the next finalize() (unless autograd replaced it), and where
  // grad_norm_squared() reads it. Simulated replicas write a summed gradient there.
  at::Tensor grad_view(size_t param) const;
  // Per parameter: whether its hook fired since the last reset_received().
  const std::vector<bool>& received_grad() const { return received_; }
  void reset_received();
  // After a replay of a captured step (runtime::StepGraph; one replica, no process group): a
  // replay runs no hook, so this marks as received what the last backward run on the host used.
  void note_replayed_step();

  // Set before prepare_for_backward() of a step.
  void request_stop(bool stop) { stop_requested_ = stop; }
  // After finalize(): a 1-element tensor, > 0 if the replicas agreed to stop after this step (any
  // rank asked, or the one replica did); 0 after a no_sync step. No host sync: it may be a view
  // into the last bucket, valid until the next prepare_for_backward().
  const at::Tensor& stop_flag() const { return stop_flag_; }

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
