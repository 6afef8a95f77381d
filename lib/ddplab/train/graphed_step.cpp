#include "ddplab/train/graphed_step.h"

#include <torch/torch.h>

namespace ddplab::train {

GraphedStep::GraphedStep(Network& net, distributed::GradReducer& reducer, ForwardBackward forward_backward)
    : graph_(net.device),
      optimizer_(device_scalar_step(*net.optimizer)),
      reducer_(reducer),
      forward_backward_(std::move(forward_backward)) {}

GraphedStep::Outputs GraphedStep::step(const at::Tensor& x, const at::Tensor& y, double lr, bool eager) {
  if (eager || !graph_.captures() || eager_steps_ < kEagerSteps) {
    ++eager_steps_;
    return run(x, y, &lr);
  }
  // Before the replay and outside it: the parameters with a gradient are those of the last step.
  optimizer_.prepare(lr);
  const bool capture = !graph_.captured();
  if (capture) {
    x_ = x.clone();
    y_ = y.clone();
    const auto out = graph_.capture([&] {
      const Outputs o = run(x_, y_, nullptr);
      return std::vector<at::Tensor>{o.loss, o.correct, o.grad_sq};
    });
    outputs_ = {out[0], out[1], out[2]};
  } else {
    x_.copy_(x);
    y_.copy_(y);
  }
  graph_.replay();
  if (!capture) reducer_.note_replayed_step();  // a capture ran the reducer's hooks on the host
  return outputs_;
}

GraphedStep::Outputs GraphedStep::run(const at::Tensor& x, const at::Tensor& y, const double* lr) {
  reducer_.prepare_for_backward();
  const auto [logits, loss] = forward_backward_(x, y);
  torch::NoGradGuard no_grad;
  Outputs out{loss.detach(), (logits.argmax(1) == y).sum(), reducer_.grad_norm_squared()};
  if (lr != nullptr) optimizer_.prepare(*lr);
  optimizer_.run();
  return out;
}

}  // namespace ddplab::train
