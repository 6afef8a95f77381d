// Optimizers from the spec: sgd (momentum, nesterov, weight_decay), adam, adamw.
#pragma once
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "ddplab/spec/spec.h"

namespace ddplab::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::OptimizerSpec& spec,
                                                        std::vector<at::Tensor> params);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace ddplab::train
