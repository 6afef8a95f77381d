#include "ddplab/data/device_data.h"

#include <algorithm>

#include <torch/torch.h>

namespace ddplab::data {

DeviceDataset::DeviceDataset(const Dataset& split, std::shared_ptr<const Transform> transform, c10::Device device)
    : transform_(std::move(transform)), device_(device) {
  TORCH_INTERNAL_ASSERT(transform_->pointwise(), "transform ", transform_->options().name, " is not pointwise");
  if (split.size() == 0) return;
  torch::NoGradGuard no_grad;
  const int64_t pad = transform_->options().pad;
  images_ = (pad > 0 ? at::constant_pad_nd(split.images, {pad, pad, pad, pad}, 0) : split.images).to(device);
  labels_ = split.labels.to(device);
  const at::Tensor table = transform_->byte_table();
  table_ = table.flatten().to(device);
  if (table.size(0) > 1)
    channel_offset_ = (torch::arange(table.size(0), torch::kLong) * 256).view({1, -1, 1, 1}).to(device);
  const ImageSize out = transform_->output_size();
  const auto longs = torch::dtype(torch::kLong).device(device);
  channels_ = torch::arange(images_.size(1), longs).view({1, -1, 1, 1});
  rows_ = torch::arange(out.height, longs);
  columns_ = torch::arange(out.width, longs);
  flipped_columns_ = columns_.flip(0);
}

Batch DeviceDataset::batch(const at::Tensor& indices, const SampleDraws* draws) const {
  torch::NoGradGuard no_grad;
  const at::Tensor bytes = crop(indices, draws);
  Batch b;
  at::Tensor entries = bytes.to(torch::kLong);
  if (channel_offset_.defined()) entries += channel_offset_;
  b.x = table_.take(entries);
  b.y = labels_.index_select(0, indices);
  return b;
}

// The samples' bytes, uint8 [b, C, H', W']: the eval crop as a view, or with draws each sample's
// own rows and (flipped) columns in one gather.
at::Tensor DeviceDataset::crop(const at::Tensor& indices, const SampleDraws* draws) const {
  const ImageSize out = transform_->output_size();
  if (draws == nullptr) {
    const SampleAugmentation a = transform_->eval_augmentation();
    const at::Tensor whole = images_.index_select(0, indices);
    if (a.top == 0 && a.left == 0 && out.height == images_.size(2) && out.width == images_.size(3)) return whole;
    return whole.narrow(2, a.top, out.height).narrow(3, a.left, out.width);
  }
  const int64_t b = indices.size(0);
  const at::Tensor rows = draws->top.index_select(0, indices).unsqueeze(1) + rows_;
  const at::Tensor flip = draws->flip.index_select(0, indices).unsqueeze(1);
  const at::Tensor cols =
      draws->left.index_select(0, indices).unsqueeze(1) + torch::where(flip, flipped_columns_, columns_);
  return images_.index(
      {indices.view({b, 1, 1, 1}), channels_, rows.view({b, 1, out.height, 1}), cols.view({b, 1, 1, out.width})});
}

DeviceData::DeviceData(const DatasetPair& data, const std::shared_ptr<const Transform>& transform, c10::Device device)
    : train(data.train, transform, device),
      test(data.test, transform, device),
      validation(data.validation, transform, device) {}

bool batches_on_device(config::DataPlacement placement, const DatasetPair& data, const Transform& transform,
                       c10::Device device) {
  switch (placement) {
    case config::DataPlacement::kHost:
      return false;
    case config::DataPlacement::kDevice:
      return true;
    case config::DataPlacement::kAuto:
      break;
  }
  if (!device.is_cuda() || !transform.pointwise()) return false;
  const int64_t pad = transform.options().pad;
  int64_t bytes = 0;
  for (const Dataset* split : {&data.train, &data.test, &data.validation}) {
    if (split->size() == 0) continue;
    const auto& images = split->images;
    bytes += images.size(0) * images.size(1) * (images.size(2) + 2 * pad) * (images.size(3) + 2 * pad);
  }
  return bytes <= kAutoPlacementBytes;
}

DeviceLoader::DeviceLoader(const DeviceDataset& train, StepShards shards, int64_t seed, config::DataOrder order)
    : train_(train), shards_(shards), seed_(seed), order_(order) {}

void DeviceLoader::start_epoch(int64_t epoch, int64_t first_step) {
  torch::NoGradGuard no_grad;
  perm_ = epoch_permutation(train_.size(), seed_, epoch, order_).to(train_.device());
  draws_.reset();
  if (train_.transform().random()) draws_ = train_.transform().draw_all(seed_, epoch, train_.size(), train_.device());
  step_ = std::max<int64_t>(first_step, 0);
}

std::optional<Batch> DeviceLoader::next() {
  if (!perm_.defined() || step_ >= shards_.steps_per_epoch) return std::nullopt;
  return train_.batch(shards_.indices(perm_, step_++), draws_ ? &*draws_ : nullptr);
}

}  // namespace ddplab::data
