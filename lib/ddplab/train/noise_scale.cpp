#include "ddplab/train/noise_scale.h"

#include <cmath>

#include <torch/torch.h>

namespace ddplab::train {

NoiseScaleStep noise_scale_step(double small_sq, double big_sq, int64_t b_small, int64_t b_big) {
  TORCH_INTERNAL_ASSERT(b_big > b_small && b_small > 0, "noise scale needs 0 < b_small < b_big, got ", b_small, " and ",
                        b_big);
  const double bs = static_cast<double>(b_small), bb = static_cast<double>(b_big);
  return {(small_sq - big_sq) / (1.0 / bs - 1.0 / bb), (bb * big_sq - bs * small_sq) / (bb - bs)};
}

GradNoiseScale::GradNoiseScale(int64_t b_small, int64_t b_big, NoiseScaleOptions options)
    : b_small_(b_small), b_big_(b_big), options_(options) {
  TORCH_INTERNAL_ASSERT(options_.decay >= 0 && options_.decay < 1, "EMA decay must be in [0, 1), got ", options_.decay);
}

void GradNoiseScale::update(const at::Tensor& small_sq, const at::Tensor& big_sq) {
  if (!measurable()) return;
  torch::NoGradGuard no_grad;
  const double bs = static_cast<double>(b_small_), bb = static_cast<double>(b_big_);
  auto small = small_sq.detach().to(torch::kFloat64), big = big_sq.detach().to(torch::kFloat64);
  // The same arithmetic as noise_scale_step(), on the device.
  auto trace = (small - big) / (1.0 / bs - 1.0 / bb);
  auto grad_sq = (big * bb - small * bs) / (bb - bs);
  const double d = options_.decay;
  if (steps_ == 0 || !trace_.defined()) {
    trace_ = trace * (1 - d);
    grad_sq_ = grad_sq * (1 - d);
  } else {
    trace_ = trace_ * d + trace * (1 - d);
    grad_sq_ = grad_sq_ * d + grad_sq * (1 - d);
  }
  ++steps_;
}

double GradNoiseScale::correction() const { return 1.0 - std::pow(options_.decay, static_cast<double>(steps_)); }

std::optional<double> GradNoiseScale::trace_ema() const {
  if (!available()) return std::nullopt;
  return trace_.item<double>() / correction();
}

std::optional<double> GradNoiseScale::grad_sq_ema() const {
  if (!available()) return std::nullopt;
  return grad_sq_.item<double>() / correction();
}

std::optional<double> GradNoiseScale::b_simple() const {
  auto g = grad_sq_ema();
  if (!g || !(*g > 0)) return std::nullopt;
  return *trace_ema() / *g;
}

double GradNoiseScale::raw_trace() const { return available() ? trace_.item<double>() : 0.0; }
double GradNoiseScale::raw_grad_sq() const { return available() ? grad_sq_.item<double>() : 0.0; }

void GradNoiseScale::set_state(double raw_trace, double raw_grad_sq, int64_t steps) {
  steps_ = steps;
  if (steps == 0) {
    trace_ = at::Tensor();
    grad_sq_ = at::Tensor();
    return;
  }
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  if (trace_.defined()) opts = opts.device(trace_.device());
  trace_ = torch::full({}, raw_trace, opts);
  grad_sq_ = torch::full({}, raw_grad_sq, opts);
}

}  // namespace ddplab::train
