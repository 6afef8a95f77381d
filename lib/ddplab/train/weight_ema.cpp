#include "ddplab/train/weight_ema.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace ddplab::train {

WeightEma::WeightEma(const std::vector<at::Tensor>& params, double decay) : decay_(decay) {
  TORCH_INTERNAL_ASSERT(decay > 0 && decay < 1, "weight EMA decay ", decay);
  at::NoGradGuard no_grad;
  for (const auto& p : params) averages_.push_back(p.detach().clone());
}

double WeightEma::decay_at(int64_t step) const {
  return std::min(decay_, (1.0 + static_cast<double>(step)) / (10.0 + static_cast<double>(step)));
}

void WeightEma::update(const std::vector<at::Tensor>& params, int64_t step) {
  TORCH_INTERNAL_ASSERT(params.size() == averages_.size());
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> detached;
  detached.reserve(params.size());
  for (const auto& p : params) detached.push_back(p.detach());
  // lerp: ema + w * (param - ema) = (1 - w) * ema + w * param, with w = 1 - d_t.
  at::_foreach_lerp_(averages_, detached, at::Scalar(1.0 - decay_at(step)));
}

void WeightEma::set_averages(const std::vector<at::Tensor>& averages) {
  TORCH_INTERNAL_ASSERT(averages.size() == averages_.size(), "weight EMA: ", averages.size(), " tensors for ",
                        averages_.size(), " parameters");
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < averages.size(); ++i) averages_[i].copy_(averages[i]);
}

}  // namespace ddplab::train
