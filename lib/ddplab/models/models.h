// The model registry. Every model maps a float image batch [B, C, H, W] to logits [B, classes].
//
//   mnist_cnn  the seed CNN (TF "Deep MNIST"): conv5x5x32 -> ReLU -> maxpool2 -> conv5x5x64 ->
//              ReLU -> maxpool2 -> fc 3136->1024 -> ReLU -> dropout(p) -> fc 1024->10
//              (3,274,634 parameters at 28x28). "same" padding, as the TF original.
//   mlp        flatten -> fc (C*H*W)->hidden -> ReLU -> dropout(p) -> fc hidden->classes; for fast tests.
//   cifar_tf_cnn  the TF CIFAR-10 tutorial model (cifar_models.h): 1,068,298 parameters at 24x24.
//   resnet20   He et al. 2016's CIFAR ResNet-20, option A shortcuts (cifar_models.h): 269,722
//              parameters; BatchNorm layers (batch_norm.h) follow model.sync_bn.
//
// Parameters are registered in forward order; the gradient buckets (distributed/grad_sync.h) take
// them in reverse. The model keeps no link to the process group: for model.sync_bn the trainer
// hands it a ReplicaSum after construction (so models/ and distributed/ stay independent).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "ddplab/config/settings.h"
#include "ddplab/models/batch_norm.h"

namespace ddplab::models {

struct InputShape {
  int64_t channels = 1, height = 28, width = 28;
  int64_t classes = 10;
};

// Which model to build; the trainer fills it from the spec's `model` section (train/options.h).
// Defaults as the spec's.
struct ModelOptions {
  config::ModelName name = config::ModelName::kMnistCnn;
  double dropout = 0.5;  // mnist_cnn and mlp
  int64_t hidden = 128;  // mlp only
  bool sync_bn = false;  // BatchNorm statistics over all replicas (batch_norm.h)
};

class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The all-reduce (ReplicaSum, batch_norm.h) that synchronized BatchNorm layers (model.sync_bn)
  // use; shared with them. Set it before training; without it they act as one replica.
  void set_replica_sum(ReplicaSum sum) { *replica_sum_ = std::move(sum); }

 protected:
  std::shared_ptr<ReplicaSum> replica_sum_ = std::make_shared<ReplicaSum>();
};

// Throws ddplab::Error when the model cannot take `shape` (mnist_cnn: height and width
// divisible by 4).
std::shared_ptr<Model> make_model(const ModelOptions& options, const InputShape& shape);

std::vector<std::string> model_names();

int64_t parameter_count(const torch::nn::Module& module);

}  // namespace ddplab::models
