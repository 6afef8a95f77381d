// cifar_tf_cnn: the TF CIFAR-10 tutorial model (tensorflow/models tutorials/image/cifar10,
//   cifar10.py inference()): conv5x5 64 'same' -> ReLU -> maxpool 3x3 stride 2 padding 1 -> LRN ->
//   conv5x5 64 'same' -> ReLU -> LRN -> maxpool 3x3 s2 p1 -> fc 384 -> ReLU -> fc 192 -> ReLU ->
//   fc classes. The fully connected layers are named fc1, fc2, fc3 (TF's local3, local4,
//   softmax_linear). At 24x24 (dataset.augment tf_tutorial) the pools give 12x12 then 6x6 and the
//   model has 1,068,298 parameters; other sizes work (fc1 follows the pooled size). Initialized as
//   the tutorial: weights from normals truncated at 2 std (conv 5e-2, fc1/fc2 0.04, fc3 1/192),
//   biases 0 (conv1, fc3) or 0.1 (conv2, fc1, fc2). TF's 'SAME' pooling pads only the bottom/right
//   edge; padding 1 on every side gives the same output size with windows shifted by one pixel.
#include "ddplab/models/cifar_tf_cnn.h"

#include <torch/torch.h>

#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

namespace nn = torch::nn;

// tf.truncated_normal: values further than 2 std from the mean are drawn again.
void truncated_normal_(at::Tensor w, double std) {
  torch::NoGradGuard no_grad;
  w.normal_(0, std);
  for (auto bad = w.abs() > 2 * std; bad.any().item<bool>(); bad = w.abs() > 2 * std)
    w.copy_(torch::where(bad, torch::empty_like(w).normal_(0, std), w));
}

// The output size of max_pool2d(kernel 3, stride 2, padding 1).
int64_t pooled(int64_t size) { return (size - 1) / 2 + 1; }

class CifarTfCnn : public Model {
 public:
  explicit CifarTfCnn(const InputShape& s)
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 64, 5).padding(2)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 64, 5).padding(2)))),
        fc1_(register_module("fc1", nn::Linear(64 * pooled(pooled(s.height)) * pooled(pooled(s.width)), 384))),
        fc2_(register_module("fc2", nn::Linear(384, 192))),
        fc3_(register_module("fc3", nn::Linear(192, s.classes))) {
    torch::NoGradGuard no_grad;
    truncated_normal_(conv1_->weight, 5e-2);
    conv1_->bias.zero_();
    truncated_normal_(conv2_->weight, 5e-2);
    conv2_->bias.fill_(0.1);
    truncated_normal_(fc1_->weight, 0.04);
    fc1_->bias.fill_(0.1);
    truncated_normal_(fc2_->weight, 0.04);
    fc2_->bias.fill_(0.1);
    truncated_normal_(fc3_->weight, 1.0 / 192.0);
    fc3_->bias.zero_();
  }

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::max_pool2d(torch::relu(conv1_->forward(x)), 3, 2, 1);
    h = tf_local_response_norm(h);
    h = tf_local_response_norm(torch::relu(conv2_->forward(h)));
    h = torch::max_pool2d(h, 3, 2, 1);
    h = torch::relu(fc1_->forward(h.flatten(1)));
    h = torch::relu(fc2_->forward(h));
    return fc3_->forward(h);
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Linear fc1_, fc2_, fc3_;
};

std::shared_ptr<Model> make(const ModelOptions&, const InputShape& shape) {
  return std::make_shared<CifarTfCnn>(shape);
}

}  // namespace

at::Tensor tf_local_response_norm(const at::Tensor& x) {
  namespace F = torch::nn::functional;
  return F::local_response_norm(x, F::LocalResponseNormFuncOptions(9).alpha(0.001).beta(0.75).k(1.0));
}

DDPLAB_REGISTER_MODEL(cifar_tf_cnn, "the TF CIFAR-10 tutorial CNN", /*has_batch_norm=*/false, &make);

}  // namespace ddplab::models
