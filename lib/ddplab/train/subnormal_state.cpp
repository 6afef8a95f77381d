#include "ddplab/train/subnormal_state.h"

#include <limits>
#include <vector>

#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace ddplab::train {
namespace {

std::vector<at::Tensor> state_tensors(const torch::optim::OptimizerParamState& state) {
  if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(&state)) return {sgd->momentum_buffer()};
  if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(&state))
    return {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()};
  if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(&state))
    return {adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()};
  return {};
}

int64_t count_subnormal(const at::Tensor& t) {
  return (t.ne(0) & t.abs().lt(std::numeric_limits<float>::min())).sum().item<int64_t>();
}

}  // namespace

SubnormalState subnormal_state(const torch::optim::Optimizer& optimizer, const NamedTensors& named) {
  SubnormalState out;
  const auto& states = optimizer.state();
  for (const auto& [name, param] : named) {
    const auto found = states.find(param.unsafeGetTensorImpl());
    if (found == states.end()) continue;
    int64_t values = 0, subnormal = 0;
    for (const auto& t : state_tensors(*found->second)) {
      if (!t.defined() || t.scalar_type() != at::kFloat) continue;
      values += t.numel();
      subnormal += count_subnormal(t);
    }
    out.values += values;
    out.subnormal += subnormal;
    if (subnormal > out.top_subnormal) {
      out.top_name = name;
      out.top_values = values;
      out.top_subnormal = subnormal;
    }
  }
  return out;
}

std::optional<std::string> subnormal_note(const SubnormalState& state, int epoch) {
  if (state.values == 0 || state.subnormal * 100 < state.values) return std::nullopt;
  return fmt::format(
      "epoch {}: {} of the optimizer state's {} values are denormal floats ({:.1f}%; {} of them in {}'s {}), "
      "which x86 computes on through microcode assists at every step; replicas.flush_denormal=true flushes "
      "them to zero (docs/performance.md, \"Denormal numbers\")",
      epoch, state.subnormal, state.values, 100.0 * state.subnormal / state.values, state.top_subnormal, state.top_name,
      state.top_values);
}

}  // namespace ddplab::train
