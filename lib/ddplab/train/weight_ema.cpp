#include "ddplab/train/weight_ema.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace ddplab::train {

namespace {

void lerp_into(std::vector<at::Tensor>& averages, const std::vector<at::Tensor>& values, double weight) {
  TORCH_INTERNAL_ASSERT(values.size() == averages.size());
  if (values.empty()) return;
  std::vector<at::Tensor> detached;
  detached.reserve(values.size());
  for (const auto& v : values) detached.push_back(v.detach());
  // lerp: ema + w * (value - ema) = (1 - w) * ema + w * value, with w = 1 - d_t.
  at::_foreach_lerp_(averages, detached, at::Scalar(weight));
}

void copy_into(std::vector<at::Tensor>& averages, const std::vector<at::Tensor>& values, const char* what) {
  TORCH_INTERNAL_ASSERT(values.size() == averages.size(), "weight EMA: ", values.size(), " tensors for ",
                        averages.size(), " ", what);
  for (size_t i = 0; i < values.size(); ++i) averages[i].copy_(values[i]);
}

}  // namespace

WeightEma::WeightEma(const std::vector<at::Tensor>& params, double decay, const std::vector<at::Tensor>& buffers)
    : decay_(decay) {
  TORCH_INTERNAL_ASSERT(decay > 0 && decay < 1, "weight EMA decay ", decay);
  at::NoGradGuard no_grad;
  for (const auto& p : params) averages_.push_back(p.detach().clone());
  for (const auto& b : buffers) {
    TORCH_INTERNAL_ASSERT(b.is_floating_point(), "weight EMA averages floating-point buffers only");
    buffer_averages_.push_back(b.detach().clone());
  }
}

double WeightEma::decay_at(int64_t step) const {
  return std::min(decay_, (1.0 + static_cast<double>(step)) / (10.0 + static_cast<double>(step)));
}

void WeightEma::update(const std::vector<at::Tensor>& params, int64_t step, const std::vector<at::Tensor>& buffers) {
  at::NoGradGuard no_grad;
  const double weight = 1.0 - decay_at(step);
  lerp_into(averages_, params, weight);
  lerp_into(buffer_averages_, buffers, weight);
}

void WeightEma::set_averages(const std::vector<at::Tensor>& averages) {
  at::NoGradGuard no_grad;
  copy_into(averages_, averages, "parameters");
}

void WeightEma::set_buffer_averages(const std::vector<at::Tensor>& averages) {
  at::NoGradGuard no_grad;
  copy_into(buffer_averages_, averages, "buffers");
}

}  // namespace ddplab::train
