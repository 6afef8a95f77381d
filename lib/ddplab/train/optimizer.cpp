#include "ddplab/train/optimizer.h"

#include <torch/torch.h>

#include "ddplab/error.h"

namespace ddplab::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::OptimizerSpec& s,
                                                        std::vector<at::Tensor> params) {
  namespace optim = torch::optim;
  if (s.name == "sgd") {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions(s.lr).momentum(s.momentum).nesterov(s.nesterov).weight_decay(s.weight_decay));
  }
  if (s.name == "adam") {
    return std::make_unique<optim::Adam>(
        params, optim::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  if (s.name == "adamw") {
    return std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  throw Error("/optimizer/name: unknown optimizer \"" + s.name + "\"");
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace ddplab::train
