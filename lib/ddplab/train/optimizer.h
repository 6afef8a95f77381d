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

// The optimizer step in a form a CUDA graph can capture once and replay every later step
// (replicas.cuda_graph, graphed_step.h), as torch.optim's `capturable=True`: the numbers that
// change from step to step (the lr; Adam's bias corrections; AdamW's decay factor) are read from
// 0-dim tensors on the parameters' device, which prepare() writes before each step, instead of
// being passed to the kernels as host scalars, which a capture would freeze. The optimizer's
// state is the same tensors (checkpoints are the optimizer's own). The arithmetic is step()'s but
// where the lr meets the update: SGD's p + (-lr)·d becomes p - (d·lr), Adam's p + s·(m/d) becomes
// p + m/(d/s), each rounded once more, so a run with it differs from one without in the last bits
// (and a replay from the same step run eagerly in none).
class DeviceScalarStep {
 public:
  virtual ~DeviceScalarStep() = default;
  // On the host, before each step: advances the optimizer's step counts and writes this step's
  // numbers for learning rate `lr` into the device tensors (a fill each, no host sync). Every
  // parameter of a group must have taken the same number of steps (else an Error naming
  // replicas.cuda_graph).
  virtual void prepare(double lr) = 0;
  // The update's kernels, reading the gradients (.grad) and the numbers prepare() wrote; nothing
  // on the host changes, so a capture of it replays as the step. The first run() after a
  // parameter's first gradient makes its state (SGD's momentum buffer): run() once before a capture.
  virtual void run() = 0;
};

// The DeviceScalarStep of an optimizer make_optimizer made (the optimizer itself).
DeviceScalarStep& device_scalar_step(torch::optim::Optimizer& optimizer);

}  // namespace ddplab::train
