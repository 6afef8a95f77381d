// Image transforms (`dataset.augment`): uint8 images in, normalized float32 batches out.
//
//   none         (v/255 - mean) / std with the training set's overall mean/std; no augmentation.
//                Bit-identical to ddplab's behaviour before transforms existed.
//   standard     train: zero-pad 4, random crop back to the image size, random horizontal flip;
//                both: per-channel (v/255 - mean_c) / std_c (training-set channel statistics).
//   tf_tutorial  as the TF CIFAR-10 tutorial (cifar10_input.py). Train: random 24x24 crop, random
//                horizontal flip, brightness + delta (delta uniform in [-63, 63] on the 0..255
//                scale), contrast (x - mean_c) * f + mean_c with f uniform in [0.2, 1.8] and mean_c
//                the channel's mean in this image (tf.image.adjust_contrast), then per-image
//                standardization (x - mean) / max(std, 1/sqrt(C*H*W)) over all of the image's
//                values (tf.image.per_image_standardization). Eval: central 24x24 crop, then
//                per-image standardization.
//
// Randomness is keyed per sample: the draws for training sample `index` in epoch `epoch` are a
// pure function of (seed, epoch, index) (a SplitMix64 stream seeded from the three). So a sample
// is augmented the same way whichever replica, batch or position it lands in: N replicas x B/N see
// exactly the augmented samples of 1 replica x B, and a resumed run sees what it would have.
// Evaluation is deterministic (no draws).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ddplab/config/settings.h"
#include "ddplab/data/dataset.h"

namespace ddplab::data {

struct ImageSize {
  int64_t channels = 1, height = 28, width = 28;
};

// How a transform normalizes the (augmented) 0..255 values.
enum class Normalize {
  kGlobal,    // (v/255 - mean) / std, overall training-set statistics
  kChannel,   // (v/255 - mean_c) / std_c, per-channel training-set statistics
  kPerImage,  // (v - m) / max(s, 1/sqrt(C*H*W)), m and s (population) of this image
};

// A transform's recipe; transform_options() gives the named ones.
struct TransformOptions {
  std::string name = "none";
  int64_t pad = 0;                            // zero padding on every side before the crop (0..255 value 0)
  int64_t crop = 0;                           // crop height and width; 0: the image's own size
  bool flip = false;                          // random horizontal flip, probability 1/2 (train only)
  double max_brightness = 0;                  // delta uniform in [-max, max], 0..255 scale (train only)
  double min_contrast = 1, max_contrast = 1;  // factor uniform in [min, max] (train only)
  Normalize normalize = Normalize::kGlobal;
};

// The recipe of dataset.augment `augment`.
TransformOptions transform_options(config::Augment augment);

// The random choices for one sample. Crop offsets are into the padded image.
struct SampleAugmentation {
  int64_t top = 0, left = 0;
  bool flip = false;
  float brightness = 0.0f;
  float contrast = 1.0f;
};

// draw()'s crop offsets and flips for every sample of an epoch, as tensors (Transform::draw_all).
struct SampleDraws {
  at::Tensor top, left;  // int64 [n]
  at::Tensor flip;       // bool [n]
};

class Transform {
 public:
  // Statistics and the input size come from data.train. Throws Error (/dataset/augment) when the
  // crop does not fit the (padded) images.
  Transform(TransformOptions options, const DatasetPair& data);

  const TransformOptions& options() const { return options_; }
  ImageSize input_size() const { return in_; }
  // The size of every transformed image, train and eval alike (the model's input size).
  ImageSize output_size() const { return out_; }

  // The training-time draws for sample `index` of epoch `epoch`: a function of the three only.
  SampleAugmentation draw(int64_t seed, int64_t epoch, int64_t index) const;
  // draw()'s top, left and flip for samples 0..n-1, computed on `device` with tensor arithmetic on
  // the same hash (splitmix64.h): bit for bit draw()'s.
  SampleDraws draw_all(int64_t seed, int64_t epoch, int64_t n, c10::Device device) const;
  // Whether the training path draws anything: a crop offset (padding, or a crop smaller than the
  // image) or a flip.
  bool random() const;
  // Whether the recipe maps each byte to a value of its own once cropped and flipped (none,
  // standard): no brightness, contrast or per-image statistics. Data on the device needs it.
  bool pointwise() const;
  // A pointwise recipe's value of byte v in channel c, float [C, 256] on the CPU: apply()'s own
  // arithmetic, so a lookup in it gives apply()'s values bit for bit.
  at::Tensor byte_table() const;
  // What evaluation applies: the central crop, no flip, no colour change.
  SampleAugmentation eval_augmentation() const;

  // Transforms one uint8 image [C, H, W] (input_size) into `out`, float [C, H', W'] (output_size).
  void apply_one(const uint8_t* image, const SampleAugmentation& a, float* out) const;

  // Gathers samples `indices` (int64 [b]) of uint8 `images` [N, C, H, W] into a contiguous float32
  // batch [b, C, H', W']: train draws per sample from (seed, epoch, indices[i]), eval does not draw.
  // Plain loops on the calling thread, never an ATen parallel region: called on the loader thread,
  // a parallel region would start a second OpenMP team beside the training's, and with more of
  // libgomp's threads than cores every thread then sleeps after each region of the step instead of
  // spinning (docs/performance.md, "The loader thread and OpenMP").
  at::Tensor apply(const at::Tensor& images, const at::Tensor& indices, bool train, int64_t seed, int64_t epoch) const;

 private:
  TransformOptions options_;
  ImageSize in_, out_;
  double mean_, std_;
  std::vector<double> channel_mean_, channel_std_;
  at::Tensor identity_table_;  // float [256]: byte v's value under augment "none"; undefined otherwise
};

// transform_options(augment) for `data`, as the trainer builds it.
std::shared_ptr<const Transform> make_transform(config::Augment augment, const DatasetPair& data);

}  // namespace ddplab::data
