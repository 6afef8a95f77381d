// A run's data and its way to the steps: the dataset (ReplicaOptions::data, else loaded from the
// spec), and, once the network and the local replicas exist, the loader (a host thread, or batches
// made on the device from the splits held there: dataset.placement) and the mover that stages
// batch k + 1 while step k runs (on CUDA its copy overlaps the step).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/device_data.h"
#include "ddplab/data/loader.h"
#include "ddplab/runtime/device.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/network.h"

namespace ddplab::train {

class TrainInput {
 public:
  // `given`: already loaded data (not owned; must outlive this), else the spec's dataset is loaded.
  TrainInput(const config::ExperimentSpec& spec, const data::DatasetPair* given);

  const data::DatasetPair& data() const { return *data_; }
  // The loader of `replicas`' shards of every global batch, for `net`'s device.
  void start(const config::ExperimentSpec& spec, const Network& net, const LocalReplicas& replicas);
  // The splits where batches are made on the device, else null.
  const data::DeviceData* on_device() const { return device_data_ ? &*device_data_ : nullptr; }
  int64_t steps() const { return loader_->steps_per_epoch(); }

  void start_epoch(int epoch, int64_t first_step) { loader_->start_epoch(epoch, first_step); }
  // The batch (x, y) of step `step` of the epoch; the next step's is staged behind it.
  std::pair<at::Tensor, at::Tensor> take(int64_t step);

 private:
  void stage(int64_t step);

  std::shared_ptr<const data::DatasetPair> data_;
  std::optional<data::DeviceData> device_data_;
  std::unique_ptr<data::BatchSource> loader_;
  std::optional<runtime::BatchMover> mover_;
};

}  // namespace ddplab::train
