#include "ddplab/train/train_input.h"

#include "ddplab/train/options.h"

namespace ddplab::train {

TrainInput::TrainInput(const config::ExperimentSpec& spec, const data::DatasetPair* given)
    : data_(given != nullptr
                ? std::shared_ptr<const data::DatasetPair>(std::shared_ptr<const data::DatasetPair>(), given)
                : std::make_shared<const data::DatasetPair>(data::load_dataset(dataset_options(spec.dataset)))) {}

void TrainInput::start(const config::ExperimentSpec& spec, const Network& net, const LocalReplicas& replicas) {
  const int strided = spec.dataset.shard == config::DataShard::kStrided ? replicas.count() : 1;
  if (data::batches_on_device(spec.dataset.placement, *data_, *net.transform, net.device)) {
    device_data_.emplace(*data_, net.transform, net.device);
    const data::StepShards shards(data_->train.size(), spec.global_batch, replicas.loader_rank(),
                                  replicas.loader_ranks(), strided);
    loader_ = std::make_unique<data::DeviceLoader>(device_data_->train, shards, spec.seed, spec.dataset.order);
  } else {
    loader_ = std::make_unique<data::TrainLoader>(*data_, net.transform, spec.global_batch, replicas.loader_rank(),
                                                  replicas.loader_ranks(), spec.seed, spec.dataset.order,
                                                  /*prefetch=*/4, /*pin_memory=*/net.device.is_cuda(), strided);
  }
  // Batches made on the device need no copy: the mover passes them through, as on a CPU.
  mover_.emplace(device_data_ ? c10::Device(c10::kCPU) : net.device);
  TORCH_INTERNAL_ASSERT(steps() > 0, "no step in an epoch of ", data_->train.size(), " samples");
}

std::pair<at::Tensor, at::Tensor> TrainInput::take(int64_t step) {
  if (!mover_->staged()) stage(step);
  auto batch = mover_->take();
  if (step + 1 < steps()) stage(step + 1);
  return batch;
}

void TrainInput::stage(int64_t step) {
  auto batch = loader_->next();
  TORCH_INTERNAL_ASSERT(batch.has_value(), "loader ended after ", step, " of ", steps(), " steps");
  mover_->stage(batch->x, batch->y);
}

}  // namespace ddplab::train
