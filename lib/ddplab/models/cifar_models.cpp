#include "ddplab/models/cifar_models.h"

#include <torch/torch.h>

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

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  nn::Conv2d conv(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
  nn::init::kaiming_normal_(conv->weight);
  return conv;
}

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride, bool sync_bn, const std::shared_ptr<const ReplicaSum>& sum)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        bn1_(register_module("bn1", BatchNorm2d(out, sync_bn, sum))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        bn2_(register_module("bn2", BatchNorm2d(out, sync_bn, sum))),
        stride_(stride),
        pad_channels_(out - in) {
    TORCH_INTERNAL_ASSERT(pad_channels_ >= 0 && pad_channels_ % 2 == 0, "option A needs out - in even and >= 0");
  }

  at::Tensor forward(const at::Tensor& x) {
    auto h = torch::relu(bn1_->forward(conv1_->forward(x)));
    h = bn2_->forward(conv2_->forward(h));
    at::Tensor shortcut = x;
    if (stride_ != 1) shortcut = shortcut.slice(2, 0, std::nullopt, stride_).slice(3, 0, std::nullopt, stride_);
    if (pad_channels_ > 0)
      shortcut = torch::constant_pad_nd(shortcut, {0, 0, 0, 0, pad_channels_ / 2, pad_channels_ / 2});
    return torch::relu(h + shortcut);
  }

 private:
  nn::Conv2d conv1_;
  BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  BatchNorm2d bn2_;
  int64_t stride_, pad_channels_;
};
TORCH_MODULE(BasicBlock);

class ResNet20 : public Model {
 public:
  ResNet20(const InputShape& s, bool sync_bn)
      : conv1_(register_module("conv1", conv3x3(s.channels, 16, 1))),
        bn1_(register_module("bn1", BatchNorm2d(16, sync_bn, replica_sum_))),
        layer1_(register_module("layer1", stage(16, 16, 1, sync_bn))),
        layer2_(register_module("layer2", stage(16, 32, 2, sync_bn))),
        layer3_(register_module("layer3", stage(32, 64, 2, sync_bn))),
        fc_(register_module("fc", nn::Linear(64, s.classes))) {
    nn::init::kaiming_normal_(fc_->weight);
  }

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::relu(bn1_->forward(conv1_->forward(x)));
    h = layer3_->forward(layer2_->forward(layer1_->forward(h)));
    return fc_->forward(h.mean({2, 3}));
  }

 private:
  nn::Sequential stage(int64_t in, int64_t out, int64_t stride, bool sync_bn) {
    nn::Sequential blocks;
    for (int i = 0; i < 3; ++i)
      blocks->push_back(BasicBlock(i == 0 ? in : out, out, i == 0 ? stride : 1, sync_bn, replica_sum_));
    return blocks;
  }

  nn::Conv2d conv1_;
  BatchNorm2d bn1_;
  nn::Sequential layer1_, layer2_, layer3_;
  nn::Linear fc_;
};

}  // namespace

at::Tensor tf_local_response_norm(const at::Tensor& x) {
  namespace F = torch::nn::functional;
  return F::local_response_norm(x, F::LocalResponseNormFuncOptions(9).alpha(0.001).beta(0.75).k(1.0));
}

std::shared_ptr<Model> make_cifar_tf_cnn(const InputShape& shape) { return std::make_shared<CifarTfCnn>(shape); }

std::shared_ptr<Model> make_resnet20(const InputShape& shape, bool sync_bn) {
  return std::make_shared<ResNet20>(shape, sync_bn);
}

}  // namespace ddplab::models
