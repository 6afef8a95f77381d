#include "ddplab/train/simulated.h"

#include <mutex>

#include <torch/torch.h>

#include "ddplab/train/network.h"
#include "ddplab/train/tensor_lists.h"

namespace ddplab::train {

SimulatedReplicas::SimulatedReplicas(torch::nn::Module& model, std::vector<at::Tensor> params,
                                     const std::vector<uint64_t>& seeds, config::Reduce reduce, c10::Device device,
                                     distributed::BuiltinCommHook comm_hook)
    : model_(model),
      params_(std::move(params)),
      reduce_(reduce),
      hook_(distributed::make_comm_hook(comm_hook)),
      generator_(dropout_generator(device)) {
  TORCH_INTERNAL_ASSERT(!seeds.empty(), "SimulatedReplicas needs at least one replica");
  TORCH_INTERNAL_ASSERT(hook_->simulates(), "comm hook ", static_cast<int>(comm_hook),
                        " cannot be simulated in one process (the spec refuses it)");
  std::lock_guard<std::mutex> lock(generator_.mutex());
  const at::Tensor saved = generator_.get_state();
  for (uint64_t seed : seeds) {
    generator_.set_current_seed(seed);
    rng_states_.push_back(generator_.get_state());
  }
  generator_.set_state(saved);
}

void SimulatedReplicas::set_rng_states(const std::vector<at::Tensor>& states) {
  TORCH_INTERNAL_ASSERT(states.size() == rng_states_.size(), "got ", states.size(), " RNG states for ",
                        rng_states_.size(), " simulated replicas");
  rng_states_ = states;
}

void SimulatedReplicas::begin_step() {
  torch::NoGradGuard no_grad;
  step_buffers_ = clone_all(model_.buffers());
  if (grad_sum_.empty())
    for (const auto& p : params_) grad_sum_.push_back(torch::zeros_like(p.detach(), hook_->sum_dtype(p.scalar_type())));
  for (auto& g : grad_sum_) g.zero_();
  used_.assign(params_.size(), false);
  norm_sum_ = torch::zeros({}, params_.empty() ? torch::TensorOptions().dtype(torch::kFloat64)
                                               : params_[0].options().dtype(torch::kFloat64));
}

void SimulatedReplicas::begin_replica(int k) {
  if (k > 0) copy_all(model_.buffers(), step_buffers_);
  std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.set_state(rng_states_[k]);
}

void SimulatedReplicas::end_replica(int k) {
  {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    rng_states_[k] = generator_.get_state();
  }
  torch::NoGradGuard no_grad;
  if (k == 0) rank0_buffers_ = clone_all(model_.buffers());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& g = params_[i].grad();
    if (!g.defined()) continue;
    used_[i] = true;
    norm_sum_ += g.pow(2).sum().to(torch::kFloat64);
    // g / N rounds as DDP's bucket.div_(N) before the all-reduce does; the hook adds it as its
    // all-reduce would (a bf16 wire rounds the contribution and the sum).
    hook_->add_replica(grad_sum_[i], reduce_ == config::Reduce::kMean ? g.div(count()) : g);
  }
}

void SimulatedReplicas::end_step(const distributed::GradReducer* reducer) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    // Write into the existing .grad (a GradReducer bucket view), so the buckets stay in place.
    if (!used_[i]) {
      p.mutable_grad() = at::Tensor();
    } else if (p.grad().defined()) {
      p.mutable_grad().copy_(grad_sum_[i]);
    } else if (reducer != nullptr) {
      p.mutable_grad() = reducer->grad_view(i);
      p.mutable_grad().copy_(grad_sum_[i]);
    } else {
      p.mutable_grad() = grad_sum_[i].to(p.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    }
  }
  copy_all(model_.buffers(), rank0_buffers_);
}

at::Tensor SimulatedReplicas::local_norm_squared_mean() const { return norm_sum_ / count(); }

}  // namespace ddplab::train
