// How a filled gradient bucket travels, chosen as DDP's register_comm_hook lets one choose: the
// GradReducer (grad_reducer.h) calls launch() when every gradient of a bucket is ready (in bucket
// order on every rank; the gradients already divided by the world size under reduce "mean"), waits
// for the works it returned, then calls finish(), which must leave the reduced values in the bucket.
// Whatever the gradients travel as, the control slots of the last bucket (stop flag, local squared
// norm, used flags) must come back summed exactly in float32: they are not gradients.
//
// The built-in hooks, by BuiltinCommHook (as c10d's BuiltinCommHookType), all made by
// make_comm_hook(), the one registry: the GradReducer and simulated replicas both take their hook
// from it, and train::builtin_comm_hook() (train/options.h) is the one place the spec chooses it.
//   kAllreduce      the bucket as it is, one all-reduce (DDP's default allreduce_hook);
//   kBf16Compress,  the gradients cast into a persistent bfloat16 or float16 buffer, all-reduced in
//   kFp16Compress   that dtype (half the bytes), cast back in finish(); the control slots in a
//                   second, small fp32 all-reduce (DDP's bf16_compress_hook and fp16_compress_hook;
//                   replicas.grad_dtype "bf16" / "fp16");
//   kPowerSgd       PowerSGD's rank-r approximation of each matrix (DDP's powerSGD_hook;
//                   replicas.compression "powersgd"; below, powersgd.cpp).
//
// A new hook (top-k, ...) is a CommHook subclass, a BuiltinCommHook, its case in make_comm_hook()
// and the setting that chooses it (docs/architecture.md, "How to extend"). Simulated replicas
// (train/simulated.h) sum N replicas in one process through the hook's simulates(), sum_dtype()
// and add_replica(), so its rounding is written once, here.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ddplab/config/settings.h"
#include "ddplab/distributed/comm.h"

namespace ddplab::distributed {

// One bucket as a hook sees it; views into the bucket's one flat buffer.
struct BucketView {
  int index = 0;       // the bucket's number: stable until CommHook::reset()
  at::Tensor flat;     // grads followed by control: what the default hook all-reduces
  at::Tensor grads;    // the gradients (flat)
  at::Tensor control;  // the last bucket's control slots; undefined in the others (so: the last bucket)
  // Each parameter's gradient, shaped as the parameter, in bucket order: views of `grads` that
  // tile it (DDP's GradBucket::gradients()), owned by the reducer. A bucket's tensors are the same
  // (same storage) at every launch until CommHook::reset(), so a hook may keep views of them.
  c10::ArrayRef<at::Tensor> gradients;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // Starts the all-reduce(s) of `bucket` over `comm` (asynchronous); returns what to wait for.
  virtual std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) = 0;
  // After those works completed: puts the reduced values into bucket.flat. A hook of several
  // rounds (PowerSGD) runs its later collectives over `comm` here, in bucket order on every rank.
  virtual void finish(Comm& comm, const BucketView& bucket) = 0;
  // Bytes all-reduced for `bucket` per step (what the ring all-reduce's traffic is counted on);
  // for a hook whose traffic changes over training, those of the bucket's last launch.
  virtual int64_t payload_bytes(const BucketView& bucket) const = 0;
  // The buckets were rebuilt: per-bucket state is stale.
  virtual void reset() {}
  // What a resumed run needs to continue as if it had not stopped (a uint8 CPU tensor, this
  // rank's: PowerSGD's error feedback differs between ranks); undefined for a stateless hook.
  // load_state() takes what save_state() gave, after the buckets are restored (restore_layout).
  virtual at::Tensor save_state() const { return {}; }
  virtual void load_state(const at::Tensor& /*state*/) {}

  // N replicas reduced in one process (train/simulated.h), as this hook's all-reduce reduces them:
  // a parameter's running sum starts as zeros of sum_dtype(its dtype), and add_replica() adds one
  // replica's contribution (its gradient, already divided by N under reduce "mean") in replica
  // order; the sum is cast back to the gradient's dtype. By default the fp32 sum of an all-reduce.
  // A hook that needs the other ranks between its rounds (PowerSGD) returns false from simulates(),
  // and the spec refuses it with replicas.mode "simulated".
  virtual bool simulates() const { return true; }
  virtual at::ScalarType sum_dtype(at::ScalarType grad) const { return grad; }
  virtual void add_replica(at::Tensor& sum, const at::Tensor& contribution) const;
};

// torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook's PowerSGDState, its defaults too.
// Before `start_iter` reduced steps every bucket is all-reduced as it is; from then on each
// gradient viewed as an n x m matrix (n = its first dimension) with r = min(n, m, rank) is sent as
// P (n x r) and Q (m x r) if (n + m) r * min_compression_rate < n m, and all-reduced as it is
// otherwise (every 1-D tensor). error_feedback adds to a bucket what the last step's approximation
// left out of this rank's gradient; warm_start starts each step's power iteration from the last
// step's Q (else a new random Q every step). New Qs are drawn as PyTorch draws them: a seed from
// NumPy's RandomState(seed).randint(10^9) (MT19937) per bucket, then torch.randn with a CPU
// generator so seeded, so the same gradients give PyTorch's values.
struct PowerSgdOptions {
  int64_t rank = 1;           // matrix_approximation_rank
  int64_t start_iter = 1000;  // start_powerSGD_iter; >= 2 with error_feedback or warm_start
  double min_compression_rate = 2.0;
  bool error_feedback = true;  // use_error_feedback
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;  // added to each column's norm in Gram-Schmidt
  uint32_t seed = 0;                       // random_seed
};

// The built-in hooks (above).
enum class BuiltinCommHook { kAllreduce, kBf16Compress, kFp16Compress, kPowerSgd };

// The hook `name` names; `powersgd` is read under kPowerSgd only.
std::unique_ptr<CommHook> make_comm_hook(BuiltinCommHook name, const PowerSgdOptions& powersgd = {});

// The registry's hooks one by one (make_comm_hook() calls these; tests call them directly).
std::unique_ptr<CommHook> allreduce_hook();
// `wire`: kBFloat16 or kHalf.
std::unique_ptr<CommHook> cast_compress_hook(at::ScalarType wire);
std::unique_ptr<CommHook> powersgd_hook(const PowerSgdOptions& options);

}  // namespace ddplab::distributed
