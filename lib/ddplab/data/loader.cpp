#include "ddplab/data/loader.h"

#include <cstring>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "ddplab/data/splitmix64.h"

namespace ddplab::data {
namespace {

// Tensor::pin_memory() copies with ATen's parallel copy above its grain size, which would open an
// OpenMP region on the loader thread (Transform::apply says why it must not): one memcpy instead.
at::Tensor pinned_copy(const at::Tensor& host) {
  TORCH_INTERNAL_ASSERT(host.is_cpu() && host.is_contiguous(), "a batch to pin must be contiguous host memory");
  at::Tensor pinned = at::empty(host.sizes(), host.options().pinned_memory(true));
  std::memcpy(pinned.data_ptr(), host.data_ptr(), host.nbytes());
  return pinned;
}

}  // namespace

at::Tensor epoch_permutation(int64_t n, int64_t seed, int64_t epoch, config::DataOrder order) {
  // A fresh generator per epoch, so the order depends only on (seed, epoch) and survives resume.
  // seed + epoch makes seed s + 1's epoch e seed s's epoch e + 1: repeats that share orders.
  const uint64_t key = order == config::DataOrder::kTorchSampler
                           ? static_cast<uint64_t>(seed + epoch)
                           : mix64(mix64(static_cast<uint64_t>(seed) + kGolden) + static_cast<uint64_t>(epoch));
  auto gen = at::detail::createCPUGenerator(key);
  return torch::randperm(n, gen, torch::kLong);
}

std::pair<int64_t, int64_t> eval_shard(int64_t n, int rank, int world) {
  TORCH_INTERNAL_ASSERT(world > 0 && rank >= 0 && rank < world, "bad rank/world ", rank, "/", world);
  return {n * rank / world, n * (rank + 1) / world};
}

Batch make_batch(const Dataset& set, const at::Tensor& indices, const Transform& transform, bool train, int64_t seed,
                 int64_t epoch) {
  torch::NoGradGuard no_grad;
  Batch b;
  b.x = transform.apply(set.images, indices, train, seed, epoch);
  b.y = set.labels.index_select(0, indices).contiguous();
  return b;
}

StepShards::StepShards(int64_t samples, int64_t global_batch, int rank, int world, int strided_replicas)
    : global_batch(global_batch),
      local_batch(world > 0 ? global_batch / world : 0),
      steps_per_epoch(global_batch > 0 ? samples / global_batch : 0),
      rank(rank),
      strided_replicas(strided_replicas) {
  TORCH_INTERNAL_ASSERT(world > 0 && rank >= 0 && rank < world, "bad rank/world ", rank, "/", world);
  TORCH_INTERNAL_ASSERT(global_batch > 0 && global_batch % world == 0, "global batch ", global_batch,
                        " not divisible by world ", world);
  TORCH_INTERNAL_ASSERT(strided_replicas > 0 && global_batch % strided_replicas == 0, "global batch ", global_batch,
                        " not divisible by ", strided_replicas, " strided replicas");
}

at::Tensor StepShards::indices(const at::Tensor& perm, int64_t step) const {
  at::Tensor global = perm.slice(0, step * global_batch, (step + 1) * global_batch);
  // On the loader thread: ATen copies a 2-D transpose in serial blocks, not in a parallel region,
  // whatever the batch (Loader.AnEpochStartsItsLoaderThreadAndNoOther holds it to that).
  if (strided_replicas > 1) global = global.view({-1, strided_replicas}).t().reshape({-1});
  return local_batch == global_batch ? global : global.slice(0, rank * local_batch, (rank + 1) * local_batch);
}

TrainLoader::TrainLoader(const DatasetPair& data, std::shared_ptr<const Transform> transform, int64_t global_batch,
                         int rank, int world, int64_t seed, config::DataOrder order, int prefetch, bool pin_memory,
                         int strided_replicas)
    : data_(data),
      transform_(std::move(transform)),
      shards_(data.train.size(), global_batch, rank, world, strided_replicas),
      seed_(seed),
      order_(order),
      prefetch_(static_cast<size_t>(std::max(prefetch, 1))),
      pin_memory_(pin_memory) {
  TORCH_INTERNAL_ASSERT(transform_ != nullptr, "TrainLoader needs a transform");
}

TrainLoader::~TrainLoader() { stop(); }

void TrainLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.clear();
  error_ = nullptr;
  stop_ = false;
}

void TrainLoader::start_epoch(int64_t epoch, int64_t first_step) {
  stop();
  // Here, not on the loader thread: randperm fills in parallel above ATen's grain size.
  at::Tensor perm = epoch_permutation(data_.train.size(), seed_, epoch, order_);
  worker_ = std::thread([this, perm, epoch, first_step] { produce(perm, epoch, first_step); });
}

void TrainLoader::produce(const at::Tensor& perm, int64_t epoch, int64_t first_step) {
  try {
    torch::NoGradGuard no_grad;
    for (int64_t t = std::max<int64_t>(first_step, 0); t < shards_.steps_per_epoch; ++t) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || queue_.size() < prefetch_; });
        if (stop_) return;
      }
      Batch b = make_batch(data_.train, shards_.indices(perm, t), *transform_, /*train=*/true, seed_, epoch);
      if (pin_memory_) {
        b.x = pinned_copy(b.x);
        b.y = pinned_copy(b.y);
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
        queue_.emplace_back(std::move(b));
      }
      cv_.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back(std::nullopt);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  cv_.notify_all();
}

std::optional<Batch> TrainLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Without a started epoch there is nothing to wait for.
  if (!worker_.joinable() && queue_.empty() && !error_) return std::nullopt;
  cv_.wait(lock, [this] { return !queue_.empty() || error_; });
  if (!queue_.empty()) {
    // The end marker stays in the queue, so further calls keep answering nullopt.
    if (!queue_.front().has_value()) return std::nullopt;
    std::optional<Batch> b = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return b;
  }
  std::exception_ptr e = error_;
  error_ = nullptr;
  // The producer has ended; the next call answers nullopt instead of blocking.
  queue_.emplace_back(std::nullopt);
  std::rethrow_exception(e);
}

}  // namespace ddplab::data
