// layers: a model described in the spec, model.layers (docs/spec.md#modellayers), applied in
// order to [B, C, H, W]. Each parameterized layer is registered as a module named by its type
// and index (conv0, batch_norm1, linear7, residual3: parameters conv0.weight, ...), in list order,
// with LibTorch's default initialization, so a list that spells out a built-in model draws the
// same initial weights from the same seed (mnist_cnn: tests/models/layers_test.cpp). Convolutions
// and linear layers have a bias; residual blocks' convolutions do not (BatchNorm follows).
// Shapes are worked out here, at construction, from the dataset's InputShape: a layer that cannot
// take its input, or a last layer that does not give [B, classes], is a spec error naming
// /model/layers/<i> and the shapes.
#include <functional>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ddplab/config/spec_error.h"
#include "ddplab/models/batch_norm.h"
#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

namespace nn = torch::nn;
using config::LayerType;

// One sample's shape between layers: {C, H, W} or {features}.
using Shape = std::vector<int64_t>;

std::string shape_text(const Shape& s) { return fmt::format("[B, {}]", fmt::join(s, ", ")); }

std::string pointer(size_t i) { return fmt::format("/model/layers/{}", i); }

// residual: conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN, plus the input (through a 1x1
// convolution with `stride` and BN where channels or size change), -> ReLU.
class ResidualImpl : public nn::Module {
 public:
  ResidualImpl(int64_t in, int64_t out, int64_t stride, bool sync_bn, const std::shared_ptr<const ReplicaSum>& sum)
      : conv1_(
            register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1_(register_module("bn1", BatchNorm2d(out, sync_bn, sum))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2_(register_module("bn2", BatchNorm2d(out, sync_bn, sum))) {
    if (in == out && stride == 1) return;
    proj_ = register_module("proj", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
    proj_bn_ = register_module("proj_bn", BatchNorm2d(out, sync_bn, sum));
  }

  at::Tensor forward(const at::Tensor& x) {
    auto h = torch::relu(bn1_->forward(conv1_->forward(x)));
    h = bn2_->forward(conv2_->forward(h));
    return torch::relu(h + (proj_ ? proj_bn_->forward(proj_->forward(x)) : x));
  }

 private:
  nn::Conv2d conv1_;
  BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  BatchNorm2d bn2_;
  nn::Conv2d proj_{nullptr};
  BatchNorm2d proj_bn_{nullptr};
};
TORCH_MODULE(Residual);

class LayersModel : public Model {
 public:
  LayersModel(const std::vector<Layer>& layers, const InputShape& s, bool sync_bn) : sync_bn_(sync_bn) {
    TORCH_INTERNAL_ASSERT(!layers.empty(), "model.layers is empty (resolve() refuses that)");
    Shape shape{s.channels, s.height, s.width};
    for (size_t i = 0; i < layers.size(); ++i) shape = add(i, layers[i], shape);
    if (shape != Shape{s.classes})
      throw config::spec_error(pointer(layers.size() - 1),
                               fmt::format("the last layer must give the logits [B, {}] (the dataset's {} classes), "
                                           "gives {}",
                                           s.classes, s.classes, shape_text(shape)));
  }

  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = x;
    for (const auto& step : steps_) h = step(h);
    return h;
  }

 private:
  using Step = std::function<at::Tensor(const at::Tensor&)>;

  // Appends layer `i`'s step and returns its output shape.
  Shape add(size_t i, const Layer& l, const Shape& in) {
    switch (l.type) {
      case LayerType::kConv:
        return add_conv(i, l, in);
      case LayerType::kBatchNorm: {
        auto bn =
            register_module(fmt::format("batch_norm{}", i), BatchNorm2d(image(i, l, in)[0], sync_bn_, replica_sum_));
        steps_.emplace_back([bn](const at::Tensor& h) { return bn->forward(h); });
        return in;
      }
      case LayerType::kRelu:
        steps_.emplace_back([](const at::Tensor& h) { return torch::relu(h); });
        return in;
      case LayerType::kGelu:
        steps_.emplace_back([](const at::Tensor& h) { return torch::gelu(h); });
        return in;
      case LayerType::kMaxPool:
        steps_.emplace_back([l](const at::Tensor& h) { return torch::max_pool2d(h, l.kernel, l.stride); });
        return window(i, l, image(i, l, in), in[0], l.kernel, 0);
      case LayerType::kAvgPool:
        steps_.emplace_back([l](const at::Tensor& h) { return torch::avg_pool2d(h, l.kernel, l.stride); });
        return window(i, l, image(i, l, in), in[0], l.kernel, 0);
      case LayerType::kDropout:
        steps_.emplace_back([this, p = l.p](const at::Tensor& h) { return torch::dropout(h, p, is_training()); });
        return in;
      case LayerType::kFlatten:
        steps_.emplace_back([](const at::Tensor& h) { return h.flatten(1); });
        return {std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>())};
      case LayerType::kLinear:
        return add_linear(i, l, in);
      case LayerType::kResidual: {
        auto block = register_module(fmt::format("residual{}", i),
                                     Residual(image(i, l, in)[0], l.channels, l.stride, sync_bn_, replica_sum_));
        steps_.emplace_back([block](const at::Tensor& h) { return block->forward(h); });
        return window(i, l, in, l.channels, 3, 1);
      }
    }
    TORCH_INTERNAL_ASSERT(false, "unhandled layer type");
  }

  Shape add_conv(size_t i, const Layer& l, const Shape& in) {
    auto conv = register_module(
        fmt::format("conv{}", i),
        nn::Conv2d(nn::Conv2dOptions(image(i, l, in)[0], l.channels, l.kernel).stride(l.stride).padding(l.padding)));
    steps_.emplace_back([conv](const at::Tensor& h) { return conv->forward(h); });
    return window(i, l, in, l.channels, l.kernel, l.padding);
  }

  Shape add_linear(size_t i, const Layer& l, const Shape& in) {
    if (in.size() != 1)
      throw config::spec_error(pointer(i), fmt::format("linear needs flat features [B, F] (put a flatten layer "
                                                       "before it), got input {}",
                                                       shape_text(in)));
    auto fc = register_module(fmt::format("linear{}", i), nn::Linear(in[0], l.features));
    steps_.emplace_back([fc](const at::Tensor& h) { return fc->forward(h); });
    return {l.features};
  }

  // `in`, which layer `i` needs to be an image [B, C, H, W].
  static const Shape& image(size_t i, const Layer& l, const Shape& in) {
    if (in.size() != 3)
      throw config::spec_error(
          pointer(i), fmt::format("{} needs images [B, C, H, W], got input {}", config::name(l.type), shape_text(in)));
    return in;
  }

  // The shape after a square window of `kernel` with l.stride and `padding` over image `in`,
  // with `channels` out.
  static Shape window(size_t i, const Layer& l, const Shape& in, int64_t channels, int64_t kernel, int64_t padding) {
    if (in[1] + 2 * padding < kernel || in[2] + 2 * padding < kernel)
      throw config::spec_error(pointer(i), fmt::format("{}'s kernel {} (padding {}) is larger than its input {}",
                                                       config::name(l.type), kernel, padding, shape_text(in)));
    return {channels, (in[1] + 2 * padding - kernel) / l.stride + 1, (in[2] + 2 * padding - kernel) / l.stride + 1};
  }

  bool sync_bn_;
  std::vector<Step> steps_;
};

std::shared_ptr<Model> make(const ModelOptions& options, const InputShape& shape) {
  if (options.layers.empty())
    throw config::spec_error("/model/layers", "model.name \"layers\" needs the list of layers, got none");
  return std::make_shared<LayersModel>(options.layers, shape, options.sync_bn);
}

}  // namespace

DDPLAB_REGISTER_MODEL(layers, "the list of layers in model.layers", /*has_batch_norm=*/false, &make);

}  // namespace ddplab::models
