#include "ddplab/train/optimizer.h"

#include <regex>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec_error.h"

namespace ddplab::train {
namespace {

namespace optim = torch::optim;

// torch::optim::SGD with its loop over parameters replaced by multi-tensor (_foreach) kernels, as
// torch.optim.SGD does by default on CUDA: the same arithmetic in the same order per element (bit
// for bit on CPU), but a handful of kernel launches per step instead of three per parameter,
// which is most of an optimizer step's cost for a small model on a GPU. The state (momentum
// buffers as SGDParamState) and its serialization are SGD's, so checkpoints are interchangeable.
class ForeachSGD : public optim::SGD, public DeviceScalarStep {
 public:
  using optim::SGD::SGD;

  at::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    at::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : param_groups_) step_group(group, nullptr);
    return loss;
  }

  void prepare(double lr) override {
    if (!lr_.defined()) lr_ = at::empty({}, param_groups_.front().params().front().options());
    lr_.fill_(lr);
  }

  void run() override {
    TORCH_INTERNAL_ASSERT(lr_.defined(), "DeviceScalarStep::run() before prepare()");
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) step_group(group, &lr_);
  }

 private:
  // `lr`: the device tensor prepare() wrote, or null for the group's own lr.
  void step_group(optim::OptimizerParamGroup& group, const at::Tensor* lr) {
    const auto& o = static_cast<const optim::SGDOptions&>(group.options());
    std::vector<at::Tensor> params, steps;  // steps: the d_p of SGD::step
    for (auto& p : group.params())
      if (p.grad().defined()) {
        params.push_back(p);
        steps.push_back(p.grad());
      }
    if (params.empty()) return;
    if (o.weight_decay() != 0) steps = at::_foreach_add(steps, params, o.weight_decay());
    if (o.momentum() != 0) {
      std::vector<at::Tensor> buffers, old_buffers, old_steps;
      for (size_t i = 0; i < params.size(); ++i) {
        auto found = state_.find(params[i].unsafeGetTensorImpl());
        if (found == state_.end()) {
          auto state = std::make_unique<optim::SGDParamState>();
          state->momentum_buffer(steps[i].detach().clone());
          buffers.push_back(state->momentum_buffer());
          state_[params[i].unsafeGetTensorImpl()] = std::move(state);
        } else {
          buffers.push_back(static_cast<optim::SGDParamState&>(*found->second).momentum_buffer());
          old_buffers.push_back(buffers.back());
          old_steps.push_back(steps[i]);
        }
      }
      if (!old_buffers.empty()) {
        at::_foreach_mul_(old_buffers, o.momentum());
        at::_foreach_add_(old_buffers, old_steps, 1 - o.dampening());
      }
      steps = o.nesterov() ? at::_foreach_add(steps, buffers, o.momentum()) : buffers;
    }
    if (lr == nullptr)
      at::_foreach_add_(params, steps, -o.lr());
    else
      at::_foreach_sub_(params, at::_foreach_mul(steps, *lr));
  }

  at::Tensor lr_;  // DeviceScalarStep's
};

// torch::optim::Adam and AdamW (`decoupled`) with their loops over parameters replaced by
// multi-tensor kernels, as ForeachSGD and torch.optim.Adam's default `foreach` path on CUDA: the
// same arithmetic per element (bit for bit on CPU; on CUDA a multi-tensor division by a scalar
// divides where a plain one multiplies by the reciprocal, so the last bit may differ there), about
// ten launches per step instead of ten per parameter, and Adam's (AdamW's) parameter state, so
// checkpoints are theirs. Each parameter keeps its own step count (one that got no gradient skipped a step).
template <class Base, class Options, class State, bool decoupled>
class ForeachAdam : public Base, public DeviceScalarStep {
 public:
  using Base::Base;

  at::Tensor step(optim::Optimizer::LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    at::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : this->param_groups_) step_group(group, nullptr);
    return loss;
  }

  void prepare(double lr) override {
    device_numbers_.resize(this->param_groups_.size());
    for (size_t g = 0; g < this->param_groups_.size(); ++g)
      prepare_group(this->param_groups_[g], lr, device_numbers_[g]);
  }

  void run() override {
    TORCH_INTERNAL_ASSERT(device_numbers_.size() == this->param_groups_.size(),
                          "DeviceScalarStep::run() before prepare()");
    torch::NoGradGuard no_grad;
    for (size_t g = 0; g < this->param_groups_.size(); ++g) step_group(this->param_groups_[g], &device_numbers_[g]);
  }

 private:
  // A group's step numbers on the device (DeviceScalarStep).
  struct DeviceNumbers {
    at::Tensor root_correction;  // sqrt(1 - beta2^t)
    at::Tensor step_size;        // -lr / (1 - beta1^t)
    at::Tensor decay;            // AdamW: 1 - lr * weight_decay
  };

  // What the eager step's kernels take: the group's parameters with a gradient and their state.
  struct Members {
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  };

  // `counting`: advance each member's step count (the eager step does; run() does not).
  Members members(optim::OptimizerParamGroup& group, bool counting) {
    Members m;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = state_of(p);
      if (counting) state.step(state.step() + 1);
      m.params.push_back(p);
      m.grads.push_back(p.grad());
      m.exp_avgs.push_back(state.exp_avg());
      m.exp_avg_sqs.push_back(state.exp_avg_sq());
    }
    return m;
  }

  void prepare_group(optim::OptimizerParamGroup& group, double lr, DeviceNumbers& numbers) {
    const at::Tensor* first = nullptr;  // the group's first parameter with a gradient
    int64_t t = 0;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = state_of(p);
      state.step(state.step() + 1);
      if (first != nullptr && state.step() != t)
        throw Error(
            fmt::format("replicas.cuda_graph: the parameters of one optimizer group took {} and {} steps (one had no "
                        "gradient in some step); a captured step keeps one step count per group",
                        t, state.step()));
      if (first == nullptr) first = &p;
      t = state.step();
    }
    if (first == nullptr) return;
    const auto& o = static_cast<const Options&>(group.options());
    const auto [beta1, beta2] = o.betas();
    if (!numbers.step_size.defined())
      for (auto* n : {&numbers.root_correction, &numbers.step_size, &numbers.decay})
        *n = at::empty({}, first->options());
    numbers.root_correction.fill_(std::sqrt(1 - std::pow(beta2, t)));
    numbers.step_size.fill_(-lr / (1 - std::pow(beta1, t)));
    if (decoupled && o.weight_decay() != 0) numbers.decay.fill_(1 - lr * o.weight_decay());
  }

  // `numbers`: the device numbers prepare() wrote, or null for the eager step (which counts).
  void step_group(optim::OptimizerParamGroup& group, const DeviceNumbers* numbers) {
    const auto& o = static_cast<const Options&>(group.options());
    TORCH_INTERNAL_ASSERT(!o.amsgrad(), "amsgrad is not a ddplab setting");
    const auto [beta1, beta2] = o.betas();
    Members m = members(group, /*counting=*/numbers == nullptr);
    if (m.params.empty()) return;
    if (o.weight_decay() != 0) {
      if (!decoupled)
        m.grads = at::_foreach_add(m.grads, m.params, o.weight_decay());
      else if (numbers != nullptr)
        at::_foreach_mul_(m.params, numbers->decay);
      else
        at::_foreach_mul_(m.params, 1 - o.lr() * o.weight_decay());
    }
    at::_foreach_mul_(m.exp_avgs, beta1);
    at::_foreach_add_(m.exp_avgs, m.grads, 1 - beta1);
    at::_foreach_mul_(m.exp_avg_sqs, beta2);
    at::_foreach_addcmul_(m.exp_avg_sqs, m.grads, m.grads, 1 - beta2);
    auto denoms = at::_foreach_sqrt(m.exp_avg_sqs);
    if (numbers != nullptr) {
      at::_foreach_div_(denoms, numbers->root_correction);
      at::_foreach_add_(denoms, o.eps());
      at::_foreach_div_(denoms, numbers->step_size);
      at::_foreach_addcdiv_(m.params, m.exp_avgs, denoms);
      return;
    }
    std::vector<at::Scalar> root_corrections, step_sizes;
    for (const auto& p : m.params) {
      const auto t = static_cast<double>(state_of(p).step());
      root_corrections.emplace_back(std::sqrt(1 - std::pow(beta2, t)));
      step_sizes.emplace_back(-o.lr() / (1 - std::pow(beta1, t)));
    }
    at::_foreach_div_(denoms, root_corrections);
    at::_foreach_add_(denoms, o.eps());
    at::_foreach_addcdiv_(m.params, m.exp_avgs, denoms, step_sizes);
  }

  State& state_of(const at::Tensor& p) {
    auto& slot = this->state_[p.unsafeGetTensorImpl()];
    if (!slot) {
      auto state = std::make_unique<State>();
      state->step(0);
      state->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
      state->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(state);
    }
    return static_cast<State&>(*slot);
  }

  std::vector<DeviceNumbers> device_numbers_;  // per group
};

// Parameter groups by weight decay: one per weight_decay_groups entry, then the rest.
std::vector<std::pair<std::vector<at::Tensor>, double>> decay_groups(const config::OptimizerSpec& s,
                                                                     const NamedParameters& params) {
  std::vector<std::pair<std::vector<at::Tensor>, double>> groups;
  std::vector<bool> taken(params.size(), false);
  for (size_t g = 0; g < s.weight_decay_groups.size(); ++g) {
    const auto& entry = s.weight_decay_groups[g];
    const std::regex re(entry.match);  // validated when the spec was resolved
    std::vector<at::Tensor> members;
    bool shadowed = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!std::regex_search(params[i].first, re)) continue;
      if (taken[i]) {
        shadowed = true;
        continue;
      }
      taken[i] = true;
      members.push_back(params[i].second);
    }
    if (members.empty()) {
      std::string names;
      for (const auto& [name, p] : params) names += (names.empty() ? "" : ", ") + name;
      throw config::spec_error(fmt::format("/optimizer/weight_decay_groups/{}/match", g),
                               fmt::format("matches no parameter{} (parameters: {}), got \"{}\"",
                                           shadowed ? " that an earlier entry has not taken" : "", names, entry.match));
    }
    groups.emplace_back(std::move(members), entry.weight_decay);
  }
  std::vector<at::Tensor> rest;
  for (size_t i = 0; i < params.size(); ++i)
    if (!taken[i]) rest.push_back(params[i].second);
  if (!rest.empty() || groups.empty()) groups.emplace_back(std::move(rest), s.weight_decay);
  return groups;
}

template <typename Optim, typename Options>
std::unique_ptr<optim::Optimizer> build(const std::vector<std::pair<std::vector<at::Tensor>, double>>& groups,
                                        const Options& defaults) {
  std::vector<optim::OptimizerParamGroup> param_groups;
  for (const auto& [members, decay] : groups) {
    auto options = std::make_unique<Options>(defaults);
    options->weight_decay(decay);
    param_groups.emplace_back(members, std::move(options));
  }
  return std::make_unique<Optim>(std::move(param_groups), defaults);
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const config::OptimizerSpec& s, const NamedParameters& params) {
  const auto groups = decay_groups(s, params);
  switch (s.name) {
    case config::OptimizerName::kSgd:
      return build<ForeachSGD>(
          groups, optim::SGDOptions(s.lr).momentum(s.momentum).nesterov(s.nesterov).weight_decay(s.weight_decay));
    case config::OptimizerName::kAdam:
      return build<ForeachAdam<optim::Adam, optim::AdamOptions, optim::AdamParamState, false>>(
          groups, optim::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
    case config::OptimizerName::kAdamw:
      return build<ForeachAdam<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState, true>>(
          groups, optim::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled optimizer ", config::name(s.name));
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

DeviceScalarStep& device_scalar_step(torch::optim::Optimizer& optimizer) {
  auto* step = dynamic_cast<DeviceScalarStep*>(&optimizer);
  TORCH_INTERNAL_ASSERT(step != nullptr, "device_scalar_step: not an optimizer of make_optimizer");
  return *step;
}

}  // namespace ddplab::train
