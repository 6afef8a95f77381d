#include "ddplab/train/optimizer.h"

#include <torch/torch.h>

#include <regex>

#include "ddplab/error.h"

namespace ddplab::train {
namespace {

namespace optim = torch::optim;

// Parameter groups by weight decay: one per weight_decay_groups entry, then the rest.
std::vector<std::pair<std::vector<at::Tensor>, double>> decay_groups(const spec::OptimizerSpec& s,
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
      throw Error("/optimizer/weight_decay_groups/" + std::to_string(g) + "/match: matches no parameter" +
                  (shadowed ? " that an earlier entry has not taken" : "") + " (parameters: " + names + "), got \"" +
                  entry.match + "\"");
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

std::unique_ptr<optim::Optimizer> make_optimizer(const spec::OptimizerSpec& s, const NamedParameters& params) {
  const auto groups = decay_groups(s, params);
  if (s.name == "sgd") {
    return build<optim::SGD>(groups,
                             optim::SGDOptions(s.lr).momentum(s.momentum).nesterov(s.nesterov).weight_decay(s.weight_decay));
  }
  if (s.name == "adam") {
    return build<optim::Adam>(groups,
                              optim::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  if (s.name == "adamw") {
    return build<optim::AdamW>(
        groups, optim::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  throw Error("/optimizer/name: unknown optimizer \"" + s.name + "\"");
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace ddplab::train
