// mnist_cnn, the seed CNN (TF "Deep MNIST"): conv5x5x32 -> ReLU -> maxpool2 -> conv5x5x64 -> ReLU ->
// maxpool2 -> fc 3136->1024 -> ReLU -> dropout(p) -> fc 1024->10 (3,274,634 parameters at 28x28).
// "same" padding, as the TF original; height and width must be divisible by 4.
#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/models/models.h"

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

std::shared_ptr<Model> make(const ModelOptions& options, const InputShape& shape) {
  if (shape.height % 4 != 0 || shape.width % 4 != 0)
    throw Error(
        fmt::format("model mnist_cnn needs images whose height and width are divisible by 4 (two 2x2 "
                    "poolings), got {}x{} (after dataset.augment)",
                    shape.height, shape.width));
  return std::make_shared<MnistCnn>(shape, options.dropout);
}

}  // namespace

DDPLAB_REGISTER_MODEL(mnist_cnn, "the TF \"Deep MNIST\" CNN", /*has_batch_norm=*/false, &make);

}  // namespace ddplab::models
