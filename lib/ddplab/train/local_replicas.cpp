#include "ddplab/train/local_replicas.h"

#include <mutex>

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include "ddplab/train/options.h"
#include "ddplab/train/simulated.h"

namespace ddplab::train {
namespace {

class ProcessReplica final : public LocalReplicas {
 public:
  ProcessReplica(const distributed::World& world, c10::Device device, const distributed::GradReducer& reducer,
                 std::shared_ptr<distributed::Comm> comm)
      : LocalReplicas(world.size, {world.rank}),
        reducer_(reducer),
        comm_(std::move(comm)),
        generator_(dropout_generator(device)) {}

  int loader_rank() const override { return ids().front(); }
  int loader_ranks() const override { return count(); }
  void compute(const at::Tensor& x, const at::Tensor& y, const ShardStep& step) override { step(x, y); }
  at::Tensor local_norm_squared_mean() const override { return reducer_.local_norm_squared_mean(); }

  std::vector<at::Tensor> dropout_states() override {
    const at::Tensor state = own_state();
    return comm_ ? distributed::allgather(*comm_, state) : std::vector<at::Tensor>{state};
  }
  bool set_dropout_states(const std::vector<at::Tensor>& states) override {
    if (static_cast<int>(states.size()) != count() || states[0].numel() != dropout_state_bytes()) return false;
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(states[static_cast<size_t>(ids().front())]);
    return true;
  }
  int64_t dropout_state_bytes() override { return own_state().numel(); }

 private:
  at::Tensor own_state() {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    return generator_.get_state();
  }

  const distributed::GradReducer& reducer_;
  std::shared_ptr<distributed::Comm> comm_;
  at::Generator generator_;
};

class SimulatedShards final : public LocalReplicas {
 public:
  SimulatedShards(const config::ExperimentSpec& spec, Network& net, const distributed::GradReducer& reducer)
      : LocalReplicas(spec.replicas.count, all_replicas(spec.replicas.count)),
        shard_(spec.per_replica_batch),
        reducer_(reducer),
        sim_(*net.model, net.params, seeds(spec), spec.replicas.reduce, net.device, builtin_comm_hook(spec.replicas)) {}

  int loader_rank() const override { return 0; }
  int loader_ranks() const override { return 1; }

  void compute(const at::Tensor& x, const at::Tensor& y, const ShardStep& step) override {
    sim_.begin_step();
    for (int k = 0; k < count(); ++k) {
      sim_.begin_replica(k);
      step(x.narrow(0, k * shard_, shard_), y.narrow(0, k * shard_, shard_));
      sim_.end_replica(k);
    }
    sim_.end_step(&reducer_);
  }
  at::Tensor local_norm_squared_mean() const override { return sim_.local_norm_squared_mean(); }

  std::vector<at::Tensor> dropout_states() override { return sim_.rng_states(); }
  bool set_dropout_states(const std::vector<at::Tensor>& states) override {
    if (static_cast<int>(states.size()) != count() || states[0].numel() != dropout_state_bytes()) return false;
    sim_.set_rng_states(states);
    return true;
  }
  int64_t dropout_state_bytes() override { return sim_.rng_states()[0].numel(); }

 private:
  static std::vector<int> all_replicas(int count) {
    std::vector<int> ids;
    for (int k = 0; k < count; ++k) ids.push_back(k);
    return ids;
  }
  static std::vector<uint64_t> seeds(const config::ExperimentSpec& spec) {
    std::vector<uint64_t> out;
    for (int k = 0; k < spec.replicas.count; ++k) out.push_back(dropout_seed(spec.seed, k));
    return out;
  }

  int64_t shard_;
  const distributed::GradReducer& reducer_;
  SimulatedReplicas sim_;
};

}  // namespace

uint64_t dropout_seed(int64_t spec_seed, int replica) {
  return static_cast<uint64_t>(spec_seed) * 1000003ULL + 1 + static_cast<uint64_t>(replica);
}

std::unique_ptr<LocalReplicas> make_local_replicas(const config::ExperimentSpec& spec, const distributed::World& world,
                                                   Network& network, const distributed::GradReducer& reducer,
                                                   std::shared_ptr<distributed::Comm> comm) {
  torch::manual_seed(dropout_seed(spec.seed, world.rank));
  if (spec.replicas.mode == config::ReplicaMode::kProcesses)
    return std::make_unique<ProcessReplica>(world, network.device, reducer, std::move(comm));
  TORCH_INTERNAL_ASSERT(world.size == 1, "simulated replicas run in one process, got world size ", world.size);
  return std::make_unique<SimulatedShards>(spec, network, reducer);
}

}  // namespace ddplab::train
