// Simulated replicas (replicas.mode "simulated"): the numerics of N data-parallel replicas
// computed by one process on one device, for predicting what N GPUs do to accuracy (not to speed).
//
// Per step the trainer splits the global batch into the N contiguous shards that N processes
// would get (data/loader.h) and, for replica k = 0..N-1, calls begin_replica(k), runs forward
// and backward on shard k, finalizes the gradient buckets (distributed/grad_reducer.h, without a Comm)
// and calls end_replica(k) (with batch.accumulate_steps K > 1, the K micro-batches of shard k
// accumulate into the buckets between the two calls, as process k's no_sync() loop does, so
// end_replica(k) reads shard k's whole gradient); end_step() then leaves in every .grad what the
// all-reduce would have left: sum_k g_k / N under `mean` (each shard's gradient divided by N
// first, as DDP does), sum_k g_k under `sum`. Then the optimizer steps once.
//
// The shards' gradients are summed by the comm hook the run's processes would use
// (distributed::make_comm_hook(), CommHook::add_replica()), so a hook's rounding is written once:
// under bf16_compress (fp16_compress) each (g_k / N) is cast to bfloat16 (float16), the
// contributions summed in that dtype in replica order (one rounding per addition), the sum cast
// back to fp32. For two replicas that is bit for bit what a bf16 all-reduce of two processes
// leaves (one addition, commutative); for more, a ring all-reduce adds in another order per chunk,
// so the result matches to bf16 rounding, not bits. PowerSGD cannot be simulated (the spec refuses it).
//
// What makes the replicas differ is kept per replica, as separate processes keep it:
//   - the dropout RNG stream: N states of the device's default generator, replica k's seeded as
//     process k seeds it (dropout_seed, local_replicas.h), swapped in by begin_replica(k) and out
//     by end_replica(k);
//   - a parameter that no shard's backward reached keeps its .grad undefined (GradReducer leaves
//     it so per shard; end_step() too when no shard used it), as DDP for a globally unused one;
//   - BatchNorm (ghost batch norm): each shard is normalized with its own batch statistics, and
//     buffers follow DDP's broadcast_buffers=True: every replica starts the step from rank 0's
//     buffers, and rank 0's updated buffers are the ones kept (every module buffer is treated so;
//     a model without buffers skips this).
// The per-shard squared gradient norms give the gradient noise scale's |G_small|^2 in one
// process (local_norm_squared_mean(); train/noise_scale.h).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include "ddplab/config/settings.h"
#include "ddplab/distributed/comm_hook.h"
#include "ddplab/distributed/grad_reducer.h"

namespace ddplab::train {

class SimulatedReplicas {
 public:
  // `params`: the model's parameters (their .grad are read and written); `seeds[k]`: replica k's
  // dropout seed (what process k passes to torch::manual_seed); `reduce`: replicas.reduce;
  // `comm_hook`: the hook whose reduction the sum imitates (builtin_comm_hook(), options.h; not kPowerSgd).
  SimulatedReplicas(torch::nn::Module& model, std::vector<at::Tensor> params, const std::vector<uint64_t>& seeds,
                    config::Reduce reduce, c10::Device device,
                    distributed::BuiltinCommHook comm_hook = distributed::BuiltinCommHook::kAllreduce);

  int count() const { return static_cast<int>(rng_states_.size()); }

  void begin_step();
  void begin_replica(int k);
  // Call after shard k's backward and GradReducer::finalize(): reads its gradient from every .grad.
  void end_replica(int k);
  // With `reducer` (the process's GradReducer), a parameter some shard used but the last one left
  // unused (its .grad undefined by that shard's finalize()) gets its bucket view back, so the
  // reduced gradient GradReducer reads (its norm: grad_norm, the divergence check, the noise scale)
  // holds what the optimizer steps on. Without it such a .grad is a fresh tensor.
  void end_step(const distributed::GradReducer* reducer = nullptr);

  // After end_step(): mean over the replicas of |g_k|^2 (0-dim float64 tensor, no host sync).
  at::Tensor local_norm_squared_mean() const;

  // One generator state per replica (checkpoints; the same layout as N processes write).
  const std::vector<at::Tensor>& rng_states() const { return rng_states_; }
  void set_rng_states(const std::vector<at::Tensor>& states);

 private:
  torch::nn::Module& model_;
  std::vector<at::Tensor> params_;
  config::Reduce reduce_;
  std::unique_ptr<distributed::CommHook> hook_;
  at::Generator generator_;
  std::vector<at::Tensor> rng_states_;
  std::vector<at::Tensor> grad_sum_;       // per parameter: sum_k g_k (/ N under mean), in hook_->sum_dtype()
  std::vector<bool> used_;                 // per parameter: some shard's backward reached it
  at::Tensor norm_sum_;                    // sum_k |g_k|^2
  std::vector<at::Tensor> step_buffers_;   // rank 0's buffers at the start of the step
  std::vector<at::Tensor> rank0_buffers_;  // rank 0's buffers after its forward
};

}  // namespace ddplab::train
