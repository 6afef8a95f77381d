// Optimizers from the spec: sgd (momentum, nesterov, weight_decay), adam, adamw.
//
// Weight decay per parameter (optimizer.weight_decay_groups): each entry becomes one parameter
// group, in spec order, holding the parameters whose name its `match` regex finds and that no
// earlier entry took; the remaining parameters form the last group with optimizer.weight_decay.
// Without entries there is one group of all parameters in registration order. Groups differ only
// in weight_decay; set_lr() sets every group's lr.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include "ddplab/config/spec.h"

namespace ddplab::train {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;

// `params` as module.named_parameters() lists them. Throws ddplab::Error naming the JSON pointer
// (/optimizer/weight_decay_groups/<i>/match) when an entry takes no parameter, listing the names.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimizerSpec& spec,
                                                        const NamedParameters& params);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace ddplab::train
