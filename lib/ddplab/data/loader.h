// Data order, sharding and batching, identical for any number of replicas.
//
// Epoch e's order is torch.randperm(N) from a CPU generator seeded with seed + e (as
// torch's DistributedSampler seeds it). Global step t of the epoch takes the samples
// perm[t*G : (t+1)*G] (G = global batch); replica r of W takes the contiguous share
// [r*G/W, (r+1)*G/W) of them, or under dataset.shard "strided" the samples r, r + W, r + 2W, ...
// of them (DistributedSampler's indices[rank::world] within the step). Either way W replicas x
// G/W see exactly the samples of 1 replica x G.
// The last partial global batch is dropped (steps_per_epoch = N / G).
//
// Evaluation takes the test set in order, replica r the slice eval_shard(N, r, W): no
// padding, no duplicates (unlike DistributedSampler, pytorch/pytorch#25162).
//
// TrainLoader gathers and transforms batches (transform.h: augmentation keyed per sample by
// (seed, epoch, index), then normalization) on a background thread, `prefetch` batches ahead,
// so the trainer never waits on data. With `pin_memory` (CUDA runs) that thread also copies each
// batch into page-locked host memory, so the host-to-GPU copy can run asynchronously.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ddplab/config/settings.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/transform.h"

namespace ddplab::data {

struct Batch {
  at::Tensor x;  // float32 [b, C, H', W'] (the transform's output size), normalized, contiguous
  at::Tensor y;  // int64 [b]
};

// Epoch `epoch`'s order of n samples, as int64 [n]: torch.randperm(n, generator) with the
// generator seeded by (seed, epoch) as `order` says. kTorchSampler: seed + epoch, exactly as
// torch's DistributedSampler (Generator().manual_seed(seed + epoch)). kIndependent (the spec's
// default): a 64-bit hash of (seed, epoch), so that seeds s and s + 1 never share an epoch's order.
at::Tensor epoch_permutation(int64_t n, int64_t seed, int64_t epoch,
                             config::DataOrder order = config::DataOrder::kIndependent);

// [begin, end) of replica `rank`'s evaluation slice of n samples over `world` replicas.
std::pair<int64_t, int64_t> eval_shard(int64_t n, int rank, int world);

// Gathers samples `indices` (int64 [b]) of `set` into a batch through `transform`: its training
// draws (keyed by seed, epoch and each sample's index) when `train`, its eval path otherwise.
Batch make_batch(const Dataset& set, const at::Tensor& indices, const Transform& transform, bool train,
                 int64_t seed = 0, int64_t epoch = 0);

// Which samples of an epoch's order each step gives one loader: the sharding above.
struct StepShards {
  // global_batch must be divisible by world and by strided_replicas (checked by the spec; asserted
  // here). The loader yields share `rank` of `world` of each global batch. strided_replicas > 1
  // first deals the global batch to that many replicas in turn and lays it out replica by replica:
  // a process of world = N replicas then gets its strided share, a process simulating N replicas
  // (world 1) every share in replica order, to be cut into consecutive shards. 1: contiguous shares.
  StepShards(int64_t samples, int64_t global_batch, int rank, int world, int strided_replicas = 1);

  // The samples of `perm` (an epoch's order, on any device) this loader gives at step `step`.
  at::Tensor indices(const at::Tensor& perm, int64_t step) const;

  int64_t global_batch, local_batch, steps_per_epoch;
  int rank, strided_replicas;
};

// What the trainer takes its training batches from: TrainLoader (made on the host, on a thread of
// its own) or DeviceLoader (device_data.h: made on the device from data held there).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t steps_per_epoch() const = 0;
  virtual int64_t local_batch() const = 0;
  // Starts epoch `epoch` at step `first_step` (for resume).
  virtual void start_epoch(int64_t epoch, int64_t first_step = 0) = 0;
  // The next batch of the current epoch, or nullopt once the epoch's steps are all taken.
  virtual std::optional<Batch> next() = 0;
};

class TrainLoader final : public BatchSource {
 public:
  // `transform` (its training path) makes the batches of data.train; the last four arguments as
  // StepShards takes them.
  TrainLoader(const DatasetPair& data, std::shared_ptr<const Transform> transform, int64_t global_batch, int rank,
              int world, int64_t seed, config::DataOrder order = config::DataOrder::kIndependent, int prefetch = 4,
              bool pin_memory = false, int strided_replicas = 1);
  ~TrainLoader() override;
  TrainLoader(const TrainLoader&) = delete;
  TrainLoader& operator=(const TrainLoader&) = delete;

  int64_t steps_per_epoch() const override { return shards_.steps_per_epoch; }
  int64_t local_batch() const override { return shards_.local_batch; }
  // Starts producing on the background thread, which must open no ATen parallel region
  // (Transform::apply says why), so the epoch's order is drawn here and a batch is pinned by one
  // memcpy.
  void start_epoch(int64_t epoch, int64_t first_step = 0) override;
  std::optional<Batch> next() override;

 private:
  void stop();
  void produce(const at::Tensor& perm, int64_t epoch, int64_t first_step);
  const DatasetPair& data_;
  std::shared_ptr<const Transform> transform_;
  StepShards shards_;
  int64_t seed_;
  config::DataOrder order_;
  size_t prefetch_;
  bool pin_memory_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::optional<Batch>> queue_;  // nullopt marks the end of the epoch
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ddplab::data
