#include "ddplab/train/step_readback.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

namespace ddplab::train {

void StepReadback::push(const at::Tensor& grad_sq, const at::Tensor& stop_flag, int64_t global_step, double lr,
                        bool local) {
  readback_.push(torch::cat({grad_sq.reshape({1}), stop_flag}).to(torch::kFloat64));
  unread_.push_back({global_step, lr, local});
}

bool StepReadback::read(int epoch, double& grad_norm_sum) {
  const auto values = readback_.pop();
  const Unread at = unread_.front();
  unread_.pop_front();
  const double grad_norm = std::sqrt(values[0]);
  if (!std::isfinite(grad_norm)) {
    Diverged diverged(fmt::format("diverged at epoch {}, step {}: the {}gradient norm is {} (lr {:g})", epoch + 1,
                                  at.step, at.local ? fmt::format("local (rank {}) ", rank_) : "",
                                  std::isnan(grad_norm) ? "NaN" : "Inf", at.lr),
                      epoch + 1, at.step);
    if (!at.local) throw diverged;
    if (!local_divergence_) local_divergence_ = diverged;
    return values[1] > 0;
  }
  grad_norm_sum += grad_norm;
  return values[1] > 0;
}

}  // namespace ddplab::train
