// Copies of a model's tensors (parameters, buffers) as lists, outside autograd: for evaluating
// other weights and putting the model's own back (weight EMA, local SGD / EASGD, simulated
// replicas' BatchNorm buffers).
#pragma once
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace ddplab::train {

// Detached clones of `tensors`.
inline std::vector<at::Tensor> clone_all(const std::vector<at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// Copies from[i] into to[i], in place (the model keeps its tensors); the lists are as long.
inline void copy_all(const std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < to.size(); ++i) to[i].detach().copy_(from[i]);
}

}  // namespace ddplab::train
