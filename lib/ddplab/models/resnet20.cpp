// resnet20: He et al. 2016 ("Deep Residual Learning", section 4.2), n = 3: conv3x3 16 -> BN ->
//   ReLU, three stages of three basic blocks (16, 32, 64 channels; stages 2 and 3 start with
//   stride 2), global average pool, fc classes. Basic block: conv3x3 -> BN -> ReLU -> conv3x3 -> BN,
//   plus the shortcut, -> ReLU. Shortcuts are option A: identity, and where the shape changes the
//   input subsampled with stride 2 and zero-padded in channels (no parameters), so the model has
//   269,722 parameters (option B's 1x1 projections would make it 272,474). Convolutions have no
//   bias and He (Kaiming) normal initialization; BatchNorm layers synchronize over replicas when
//   `sync_bn` (batch_norm.h), through the model's ReplicaSum.
#include <torch/torch.h>

#include "ddplab/models/batch_norm.h"
#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

namespace nn = torch::nn;

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

std::shared_ptr<Model> make(const ModelOptions& options, const InputShape& shape) {
  return std::make_shared<ResNet20>(shape, options.sync_bn);
}

}  // namespace

DDPLAB_REGISTER_MODEL(resnet20, "He et al. 2016's CIFAR ResNet-20, option A shortcuts", /*has_batch_norm=*/true, &make);

}  // namespace ddplab::models
