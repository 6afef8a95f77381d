// The replicas this process computes, behind one interface so that the trainer's step, its
// reduction accounting, its checkpoints and its loader have no branch on how replicas are laid
// out. Two implementations (local_replicas.cpp):
//   - one replica per process (replicas.mode "processes", DDP's way): this rank's replica; its
//     gradient is all-reduced by the GradReducer buckets during backward;
//   - all N replicas in this one process (replicas.mode "simulated", simulated.h): the global
//     batch is split into the N shards, each replica's forward and backward runs on its shard
//     with its own dropout stream and BatchNorm statistics, and the gradients are combined as
//     the all-reduce would.
// Each replica k draws its dropout masks from its own stream, seeded by dropout_seed(k) as
// process k seeds it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/distributed/world.h"
#include "ddplab/train/network.h"

namespace ddplab::train {

class LocalReplicas {
 public:
  // Forward and backward of one replica on its shard (x [b, C, H, W], y [b]); the gradient goes
  // into the GradReducer buckets.
  using ShardStep = std::function<void(const at::Tensor& x, const at::Tensor& y)>;

  virtual ~LocalReplicas() = default;

  // Every replica of the run (replicas.count).
  int count() const { return count_; }
  // The replicas this process computes, ascending; it also evaluates their shards of the test
  // and validation sets.
  const std::vector<int>& ids() const { return ids_; }
  // What the loader gives this process of each global batch (data/loader.h): part `loader_rank()`
  // of `loader_ranks()`, the local replicas' shards one after another.
  virtual int loader_rank() const = 0;
  virtual int loader_ranks() const = 0;

  // Runs `step` once per local replica on its shard of this process's batch (x, y), then leaves
  // in every .grad what the all-reduce leaves there.
  virtual void compute(const at::Tensor& x, const at::Tensor& y, const ShardStep& step) = 0;
  // After compute(): the mean over the run's replicas of |g_k|^2 of their own gradients (the
  // gradient noise scale's |G_small|^2), a 0-dim float64 tensor on the device, no host sync.
  virtual at::Tensor local_norm_squared_mean() const = 0;

  // The dropout generator state of every replica of the run, index = replica (a collective over
  // processes: every rank calls it).
  virtual std::vector<at::Tensor> dropout_states() = 0;
  // Restores dropout_states(); false, changing nothing, when they belong to another layout
  // (another replica count, or generators of another device).
  virtual bool set_dropout_states(const std::vector<at::Tensor>& states) = 0;
  // The bytes of one generator state here (to say why set_dropout_states refused).
  virtual int64_t dropout_state_bytes() = 0;

 protected:
  LocalReplicas(int count, std::vector<int> ids) : count_(count), ids_(std::move(ids)) {}

 private:
  int count_;
  std::vector<int> ids_;
};

// Replica k's dropout seed: what process k passes to torch::manual_seed.
uint64_t dropout_seed(int64_t spec_seed, int replica);

// The replicas of `world.rank` as the spec lays them out; seeds the dropout stream(s). `reducer`
// and `comm` (null for one process) must outlive the result.
std::unique_ptr<LocalReplicas> make_local_replicas(const config::ExperimentSpec& spec, const distributed::World& world,
                                                   Network& network, const distributed::GradReducer& reducer,
                                                   std::shared_ptr<distributed::Comm> comm);

}  // namespace ddplab::train
