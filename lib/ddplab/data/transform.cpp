#include "ddplab/data/transform.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/data/splitmix64.h"

namespace ddplab::data {
namespace {

class SampleRng {
 public:
  SampleRng(int64_t seed, int64_t epoch, int64_t index) : state_(index_state(epoch_key(seed, epoch), index)) {}
  uint64_t next() { return mix64(state_ += kGolden); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }  // [0, n)

  // Chained so that (seed, epoch, index) triples that differ anywhere start apart; the index's
  // link also on a tensor of indices (Transform::draw_all).
  static uint64_t epoch_key(int64_t seed, int64_t epoch) {
    const uint64_t state = mix64(static_cast<uint64_t>(seed) + kGolden);
    return mix64(state ^ mix64(static_cast<uint64_t>(epoch) + 2 * kGolden));
  }
  static uint64_t index_state(uint64_t key, int64_t index) {
    return mix64(key ^ mix64(static_cast<uint64_t>(index) + 3 * kGolden));
  }
  static at::Tensor index_state(uint64_t key, const at::Tensor& index) {
    return mix64(mix64(index + as_operand<at::Tensor>(3 * kGolden)) ^ as_operand<at::Tensor>(key));
  }

 private:
  uint64_t state_;
};

// SampleRng::integer(n) of the uint64 draws `r` (int64 bit patterns): the unsigned remainder, from
// the two 32-bit halves, as tensors have no unsigned 64-bit arithmetic.
at::Tensor unsigned_remainder(const at::Tensor& r, int64_t n) {
  const int64_t two32 = (int64_t{1} << 32) % n;
  const at::Tensor hi = shift_right(r, 32).remainder(n), lo = r.bitwise_and(int64_t{0xFFFFFFFF});
  return (hi * two32 + lo).remainder(n);
}

bool is_identity(const TransformOptions& o) {
  return o.pad == 0 && o.crop == 0 && !o.flip && o.max_brightness == 0 && o.min_contrast == 1 && o.max_contrast == 1 &&
         o.normalize == Normalize::kGlobal;
}

}  // namespace

TransformOptions transform_options(config::Augment augment) {
  TransformOptions o;
  o.name = config::name(augment);
  switch (augment) {
    case config::Augment::kNone:
      return o;
    case config::Augment::kStandard:
      o.pad = 4;
      o.flip = true;
      o.normalize = Normalize::kChannel;
      return o;
    case config::Augment::kTfTutorial:
      o.crop = 24;
      o.flip = true;
      o.max_brightness = 63;
      o.min_contrast = 0.2;
      o.max_contrast = 1.8;
      o.normalize = Normalize::kPerImage;
      return o;
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled augment ", o.name);
}

Transform::Transform(TransformOptions options, const DatasetPair& data)
    : options_(std::move(options)),
      mean_(data.mean),
      std_(data.std),
      channel_mean_(data.channel_mean),
      channel_std_(data.channel_std) {
  const at::Tensor& images = data.train.images;
  TORCH_INTERNAL_ASSERT(images.dim() == 4, "images must be [N, C, H, W]");
  in_ = {images.size(1), images.size(2), images.size(3)};
  out_ = in_;
  // Exactly the tensor ops (and so the rounding) of ddplab before transforms, so MNIST results
  // stay put: (v / 255 - mean) / std in float, once per byte value v.
  if (is_identity(options_))
    identity_table_ = torch::arange(256, torch::kFloat).div_(255.0).sub_(mean_).div_(std_).contiguous();
  if (options_.crop > 0) out_.height = out_.width = options_.crop;
  if (out_.height > in_.height + 2 * options_.pad || out_.width > in_.width + 2 * options_.pad) {
    throw config::spec_error("/dataset/augment",
                             fmt::format("\"{}\" crops {}x{}, larger than the {}x{} images of dataset '{}'",
                                         options_.name, out_.height, out_.width, in_.height, in_.width, data.name));
  }
  if (options_.normalize == Normalize::kChannel) {
    TORCH_INTERNAL_ASSERT(static_cast<int64_t>(channel_mean_.size()) == in_.channels &&
                              static_cast<int64_t>(channel_std_.size()) == in_.channels,
                          "channel statistics do not match the ", in_.channels, " channels");
  }
}

SampleAugmentation Transform::draw(int64_t seed, int64_t epoch, int64_t index) const {
  SampleRng rng(seed, epoch, index);
  SampleAugmentation a;
  // Always the same number of draws in the same order, whatever the recipe uses.
  a.top = rng.integer(in_.height + 2 * options_.pad - out_.height + 1);
  a.left = rng.integer(in_.width + 2 * options_.pad - out_.width + 1);
  a.flip = rng.uniform() < 0.5 && options_.flip;
  a.brightness = static_cast<float>(rng.uniform(-options_.max_brightness, options_.max_brightness));
  a.contrast = static_cast<float>(rng.uniform(options_.min_contrast, options_.max_contrast));
  return a;
}

SampleDraws Transform::draw_all(int64_t seed, int64_t epoch, int64_t n, c10::Device device) const {
  torch::NoGradGuard no_grad;
  const at::Tensor state = SampleRng::index_state(SampleRng::epoch_key(seed, epoch),
                                                  torch::arange(n, torch::dtype(torch::kLong).device(device)));
  // SampleRng::next() for the k-th time: the state advanced k steps, then mixed (draw()'s order).
  auto next = [&](int k) { return mix64(state + as_operand<at::Tensor>(static_cast<uint64_t>(k) * kGolden)); };
  SampleDraws d;
  d.top = unsigned_remainder(next(1), in_.height + 2 * options_.pad - out_.height + 1);
  d.left = unsigned_remainder(next(2), in_.width + 2 * options_.pad - out_.width + 1);
  // uniform() < 0.5 is the top bit clear: a non-negative int64.
  d.flip = options_.flip ? next(3).ge(0) : torch::zeros({n}, torch::dtype(torch::kBool).device(device));
  return d;
}

bool Transform::pointwise() const {
  return options_.max_brightness == 0 && options_.min_contrast == 1 && options_.max_contrast == 1 &&
         options_.normalize != Normalize::kPerImage;
}

bool Transform::random() const {
  return options_.flip || out_.height != in_.height + 2 * options_.pad || out_.width != in_.width + 2 * options_.pad;
}

at::Tensor Transform::byte_table() const {
  TORCH_INTERNAL_ASSERT(pointwise(), "transform ", options_.name, " has no byte table");
  torch::NoGradGuard no_grad;
  // Image v holds byte v everywhere; its eval transform's corner pixel is v's value per channel.
  const at::Tensor bytes = torch::arange(256, torch::kLong);
  const at::Tensor images =
      bytes.to(torch::kUInt8).view({256, 1, 1, 1}).expand({256, in_.channels, in_.height, in_.width}).contiguous();
  return apply(images, bytes, /*train=*/false, 0, 0).select(3, 0).select(2, 0).t().contiguous();
}

SampleAugmentation Transform::eval_augmentation() const {
  SampleAugmentation a;
  a.top = (in_.height + 2 * options_.pad - out_.height) / 2;
  a.left = (in_.width + 2 * options_.pad - out_.width) / 2;
  return a;
}

void Transform::apply_one(const uint8_t* image, const SampleAugmentation& a, float* out) const {
  const int64_t h = in_.height, w = in_.width, oh = out_.height, ow = out_.width, pad = options_.pad;
  const int64_t plane = oh * ow;
  for (int64_t c = 0; c < in_.channels; ++c) {
    const uint8_t* src = image + c * h * w;
    float* dst = out + c * plane;
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t sy = a.top + y - pad;
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t sx = a.left + (a.flip ? ow - 1 - x : x) - pad;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        dst[y * ow + x] = inside ? static_cast<float>(src[sy * w + sx]) : 0.0f;
      }
    }
  }
  const int64_t n = in_.channels * plane;
  if (a.brightness != 0.0f)
    for (int64_t i = 0; i < n; ++i) out[i] += a.brightness;
  if (a.contrast != 1.0f) {
    for (int64_t c = 0; c < in_.channels; ++c) {
      float* p = out + c * plane;
      double sum = 0;
      for (int64_t i = 0; i < plane; ++i) sum += p[i];
      const auto m = static_cast<float>(sum / static_cast<double>(plane));
      for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) * a.contrast + m;
    }
  }
  switch (options_.normalize) {
    case Normalize::kGlobal:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((out[i] / 255.0 - mean_) / std_);
      break;
    case Normalize::kChannel:
      for (int64_t c = 0; c < in_.channels; ++c) {
        float* p = out + c * plane;
        const double m = channel_mean_[static_cast<size_t>(c)], s = channel_std_[static_cast<size_t>(c)];
        for (int64_t i = 0; i < plane; ++i) p[i] = static_cast<float>((p[i] / 255.0 - m) / s);
      }
      break;
    case Normalize::kPerImage: {
      double sum = 0, sum_sq = 0;
      for (int64_t i = 0; i < n; ++i) sum += out[i];
      const double m = sum / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) sum_sq += (out[i] - m) * (out[i] - m);
      const double s = std::max(std::sqrt(sum_sq / static_cast<double>(n)), 1.0 / std::sqrt(static_cast<double>(n)));
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((out[i] - m) / s);
      break;
    }
  }
}

at::Tensor Transform::apply(const at::Tensor& images, const at::Tensor& indices, bool train, int64_t seed,
                            int64_t epoch) const {
  torch::NoGradGuard no_grad;
  TORCH_INTERNAL_ASSERT(images.scalar_type() == torch::kUInt8 && images.is_contiguous() &&
                            images.size(1) == in_.channels && images.size(2) == in_.height &&
                            images.size(3) == in_.width,
                        "images do not match the transform's input size");
  auto idx = indices.to(torch::kLong).contiguous();
  const int64_t b = idx.numel(), n = images.size(0);
  auto out = torch::empty({b, out_.channels, out_.height, out_.width}, torch::kFloat);
  const int64_t in_numel = in_.channels * in_.height * in_.width, out_numel = out_.channels * out_.height * out_.width;
  const int64_t* ip = idx.data_ptr<int64_t>();
  const uint8_t* src = images.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  const SampleAugmentation fixed = eval_augmentation();
  const float* table = identity_table_.defined() ? identity_table_.data_ptr<float>() : nullptr;
  for (int64_t i = 0; i < b; ++i) {
    TORCH_CHECK(ip[i] >= 0 && ip[i] < n, "sample index ", ip[i], " out of range [0, ", n, ")");
    const uint8_t* image = src + ip[i] * in_numel;
    float* o = dst + i * out_numel;
    if (table != nullptr) {
      for (int64_t k = 0; k < in_numel; ++k) o[k] = table[image[k]];
    } else {
      apply_one(image, train ? draw(seed, epoch, ip[i]) : fixed, o);
    }
  }
  return out;
}

std::shared_ptr<const Transform> make_transform(config::Augment augment, const DatasetPair& data) {
  return std::make_shared<const Transform>(transform_options(augment), data);
}

}  // namespace ddplab::data
