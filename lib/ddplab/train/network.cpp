#include "ddplab/train/network.h"

#include <unordered_set>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ddplab/config/spec_error.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/runtime/device.h"
#include "ddplab/train/optimizer.h"
#include "ddplab/train/options.h"

namespace ddplab::train {
namespace {

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

// A tensor reached by two names (tied weights) is one parameter, under its first name, as
// PyTorch's named_parameters() and DDP list it: one gradient hook, one bucket slot, one update.
void add_parameters(Network& net) {
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : net.model->named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    net.named.emplace_back(item.key(), item.value());
    net.params.push_back(item.value());
  }
}

// Local SGD and EASGD average the parameters as one flat buffer of one dtype (ParamAverager).
void check_one_dtype_to_average(const config::ExperimentSpec& spec, const NamedTensors& named) {
  if (spec.replicas.sync.method == config::SyncMethod::kAllreduce || named.empty()) return;
  const auto& [first, p0] = named.front();
  for (const auto& [name, p] : named) {
    if (p.scalar_type() == p0.scalar_type()) continue;
    throw config::spec_error(
        "/replicas/sync",
        fmt::format("{} averages the parameters as one buffer of one dtype, but the model's parameter '{}' is {} "
                    "where '{}' is {}; use replicas.sync \"allreduce\" or a model whose parameters share one dtype",
                    config::name(spec.replicas.sync.method), name, c10::getDtypeNames(p.scalar_type()).first, first,
                    c10::getDtypeNames(p0.scalar_type()).first));
  }
}

}  // namespace

std::vector<at::Tensor> Network::floating_buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& b : buffers)
    if (b.is_floating_point()) out.push_back(b);
  return out;
}

Network make_network(const config::ExperimentSpec& spec, const data::DatasetPair& data, int rank) {
  check_batch_fits(spec, data);
  Network net;
  net.transform = data::make_transform(spec.dataset.augment, data);
  torch::manual_seed(static_cast<uint64_t>(spec.seed) + (spec.debug.has(config::Fault::kSkipBroadcast) ? rank : 0));
  net.model = models::make_model(model_options(spec.model), input_shape(*net.transform, data));
  check_sync_fits_model(spec, *net.model);
  add_parameters(net);
  check_one_dtype_to_average(spec, net.named);
  for (const auto& b : net.model->buffers()) net.buffers.push_back(b);
  net.optimizer = make_optimizer(spec.optimizer, net.named);
  return net;
}

void place_on_device(Network& network, const config::ExperimentSpec& spec, const distributed::World& world) {
  if (spec.replicas.device != config::Device::kCuda) return;
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const int local_rank = world.local_rank;
  if (gpus == 0 || (spec.replicas.backend == config::Backend::kNccl && gpus <= local_rank))
    throw config::spec_error("/replicas/device",
                             fmt::format("cuda: local rank {} needs GPU {}, but {} GPU(s) are visible "
                                         "(NCCL needs one GPU per rank; backend gloo can share one)",
                                         local_rank, local_rank, gpus));
  network.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  runtime::select_device(network.device);
  network.model->to(network.device);
}

at::Generator dropout_generator(c10::Device device) {
  return at::globalContext().defaultGenerator(device.is_cuda() ? device : c10::Device(c10::kCPU));
}

std::shared_ptr<distributed::Comm> connect(Network& network, const config::ExperimentSpec& spec,
                                           const distributed::World& world, std::shared_ptr<distributed::Comm> comm,
                                           bool broadcast) {
  if (world.size == 1) return comm;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(spec.replicas.timeout_s * 1000));
  if (!comm) comm = distributed::make_comm(world, spec.replicas.backend, timeout);
  std::vector<at::Tensor> state = network.params;
  state.insert(state.end(), network.buffers.begin(), network.buffers.end());
  if (broadcast) distributed::broadcast_coalesced(*comm, state, 0);
  if (spec.model.sync_bn)
    network.model->set_replica_sum([comm](at::Tensor& t) { distributed::allreduce_sum(*comm, t); });
  return comm;
}

}  // namespace ddplab::train
