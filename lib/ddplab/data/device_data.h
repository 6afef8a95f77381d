// Data held where the model runs (dataset.placement "device"): each split's uint8 images and
// labels are copied to the device once, and every batch is gathered, cropped, flipped and
// normalized there by a few kernels: no per-step host work, allocation or host-to-device copy.
//
// The batches are the host's (make_batch, TrainLoader) bit for bit, on any device:
//   - normalization is a lookup of each byte in Transform::byte_table(), which the host computed
//     with apply()'s own arithmetic (for the recipes whose value of a pixel depends on its byte
//     alone: augment "none" and "standard");
//   - the crop offsets and flips of an epoch are Transform::draw_all's, the host's per-sample hash
//     of (seed, epoch, index) computed on the device for every sample at the epoch's start;
//   - the order and the shards are epoch_permutation's and StepShards', as on the host.
// So a run's records do not depend on where its batches were made.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ddplab/config/settings.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/loader.h"
#include "ddplab/data/transform.h"

namespace ddplab::data {

// What dataset.placement "auto" puts on a GPU at most: the splits' bytes there, padded.
inline constexpr int64_t kAutoPlacementBytes = int64_t{2} << 30;

// One split on the device.
class DeviceDataset {
 public:
  // `transform` must be pointwise() (the spec allows augment none and standard only). An empty
  // `split` (no validation split) holds nothing.
  DeviceDataset(const Dataset& split, std::shared_ptr<const Transform> transform, c10::Device device);

  int64_t size() const { return labels_.defined() ? labels_.size(0) : 0; }
  c10::Device device() const { return device_; }
  const Transform& transform() const { return *transform_; }

  // The samples `indices` (int64 [b], on the device) as make_batch makes them: their training
  // transform under `draws` (an epoch's Transform::draw_all), or with none the eval transform.
  Batch batch(const at::Tensor& indices, const SampleDraws* draws = nullptr) const;

 private:
  at::Tensor crop(const at::Tensor& indices, const SampleDraws* draws) const;

  std::shared_ptr<const Transform> transform_;
  c10::Device device_{c10::kCPU};
  at::Tensor images_;          // uint8 [N, C, H + 2 pad, W + 2 pad]: zero-padded once, as the crop pads
  at::Tensor labels_;          // int64 [N]
  at::Tensor table_;           // float [C * 256]: Transform::byte_table, flattened
  at::Tensor channel_offset_;  // int64 [1, C, 1, 1]: channel c's start in table_ (c * 256); undefined when C is 1
  // The crop's constant indices, made once: channels int64 [1, C, 1, 1]; 0..H'-1; 0..W'-1 and reversed.
  at::Tensor channels_, rows_, columns_, flipped_columns_;
};

// The splits of a DatasetPair on the device.
struct DeviceData {
  DeviceDataset train, test, validation;  // validation empty without a split

  DeviceData(const DatasetPair& data, const std::shared_ptr<const Transform>& transform, c10::Device device);
};

// Whether batches are made on `device`: dataset.placement "device", or "auto" on a GPU with a
// pointwise transform and at most kAutoPlacementBytes of padded splits.
bool batches_on_device(config::DataPlacement placement, const DatasetPair& data, const Transform& transform,
                       c10::Device device);

// TrainLoader's batches, made on the device from `train` (which must outlive it): the order of
// epoch_permutation(seed, epoch, order) and the shards of `shards`, made when next() is called,
// on the current stream.
class DeviceLoader final : public BatchSource {
 public:
  DeviceLoader(const DeviceDataset& train, StepShards shards, int64_t seed,
               config::DataOrder order = config::DataOrder::kIndependent);

  int64_t steps_per_epoch() const override { return shards_.steps_per_epoch; }
  int64_t local_batch() const override { return shards_.local_batch; }
  // Copies the epoch's order to the device and draws every sample's augmentation there.
  void start_epoch(int64_t epoch, int64_t first_step = 0) override;
  std::optional<Batch> next() override;

 private:
  const DeviceDataset& train_;
  StepShards shards_;
  int64_t seed_;
  config::DataOrder order_;
  at::Tensor perm_;                   // the epoch's order, on the device
  std::optional<SampleDraws> draws_;  // the epoch's draws, when the transform draws
  int64_t step_ = 0;
};

}  // namespace ddplab::data
