#include "ddplab/models/models.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/models/cifar_models.h"

namespace ddplab::models {
namespace {

namespace nn = torch::nn;

class MnistCnn : public Model {
 public:
  MnistCnn(const InputShape& s, double dropout)
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 32, 5).padding(2)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)))),
        fc1_(register_module("fc1", nn::Linear(64 * (s.height / 4) * (s.width / 4), 1024))),
        fc2_(register_module("fc2", nn::Linear(1024, s.classes))),
        dropout_(dropout) {}

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_->forward(h)), 2);
    h = torch::relu(fc1_->forward(h.flatten(1)));
    h = torch::dropout(h, dropout_, is_training());
    return fc2_->forward(h);
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Linear fc1_, fc2_;
  double dropout_;
};

class Mlp : public Model {
 public:
  Mlp(const InputShape& s, int64_t hidden, double dropout)
      : fc1_(register_module("fc1", nn::Linear(s.channels * s.height * s.width, hidden))),
        fc2_(register_module("fc2", nn::Linear(hidden, s.classes))),
        dropout_(dropout) {}

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::relu(fc1_->forward(x.flatten(1)));
    h = torch::dropout(h, dropout_, is_training());
    return fc2_->forward(h);
  }

 private:
  nn::Linear fc1_, fc2_;
  double dropout_;
};

}  // namespace

std::shared_ptr<Model> make_model(const ModelOptions& spec, const InputShape& shape) {
  switch (spec.name) {
    case config::ModelName::kMnistCnn:
      if (shape.height % 4 != 0 || shape.width % 4 != 0)
        throw Error(
            fmt::format("model mnist_cnn needs images whose height and width are divisible by 4 (two 2x2 "
                        "poolings), got {}x{} (after dataset.augment)",
                        shape.height, shape.width));
      return std::make_shared<MnistCnn>(shape, spec.dropout);
    case config::ModelName::kMlp:
      return std::make_shared<Mlp>(shape, spec.hidden, spec.dropout);
    case config::ModelName::kCifarTfCnn:
      return make_cifar_tf_cnn(shape);
    case config::ModelName::kResnet20:
      return make_resnet20(shape, spec.sync_bn);
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled model ", config::name(spec.name));
}

std::vector<std::string> model_names() {
  const auto& names = config::SettingNames<config::ModelName>::names;
  return {names.begin(), names.end()};
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace ddplab::models
