// The model registry. Every model maps a float image batch [B, C, H, W] to logits [B, classes].
//
//   mnist_cnn  the seed CNN (TF "Deep MNIST"): conv5x5x32 -> ReLU -> maxpool2 -> conv5x5x64 ->
//              ReLU -> maxpool2 -> fc 3136->1024 -> ReLU -> dropout(p) -> fc 1024->10
//              (3,274,634 parameters at 28x28). "same" padding, as the TF original.
//   mlp        flatten -> fc (C*H*W)->hidden -> ReLU -> dropout(p) -> fc hidden->classes; for fast tests.
//
// Parameters are registered in forward order; the gradient buckets (dist/grad_sync.h) take
// them in reverse.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "ddplab/spec/spec.h"

namespace ddplab::models {

struct InputShape {
  int64_t channels = 1, height = 28, width = 28;
  int64_t classes = 10;
};

class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

// Throws ddplab::Error for an unknown name (the spec schema lists the known ones).
std::shared_ptr<Model> make_model(const spec::ModelSpec& spec, const InputShape& shape);

std::vector<std::string> model_names();

int64_t parameter_count(const torch::nn::Module& module);

}  // namespace ddplab::models
