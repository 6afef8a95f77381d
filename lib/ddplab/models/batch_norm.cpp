#include "ddplab/models/batch_norm.h"

#include <torch/torch.h>

namespace ddplab::models {

at::Tensor sum_over_replicas(const at::Tensor& local, const std::shared_ptr<const ReplicaSum>& sum) {
  if (!sum || !*sum) return local;
  at::Tensor total = local.detach().clone();
  (*sum)(total);
  if (!local.requires_grad()) return total;
  // (local - local) is exactly 0, so the value is the reduced sum; the gradient passes to `local`
  // unchanged, after the hook has summed it over the replicas.
  at::Tensor out = (local - local.detach()) + total;
  out.register_hook([sum](const at::Tensor& grad) {
    at::Tensor g = grad.clone();
    (*sum)(g);
    return g;
  });
  return out;
}

BatchNorm2dImpl::BatchNorm2dImpl(int64_t features, bool sync, std::shared_ptr<const ReplicaSum> sum)
    : sync_(sync), sum_(std::move(sum)) {
  weight = register_parameter("weight", torch::ones({features}));
  bias = register_parameter("bias", torch::zeros({features}));
  running_mean = register_buffer("running_mean", torch::zeros({features}));
  running_var = register_buffer("running_var", torch::ones({features}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
}

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == weight.size(0), "BatchNorm2d of ", weight.size(0),
              " channels got input of shape ", x.sizes());
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
  }
  if (sync_ && is_training()) return forward_synced(x);
  return torch::batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps,
                           at::globalContext().userEnabledCuDNN());
}

at::Tensor BatchNorm2dImpl::forward_synced(const at::Tensor& x) {
  const int64_t channels = x.size(1);
  const at::Tensor xd = x.to(torch::kDouble);
  const at::Tensor count = torch::full({1}, static_cast<double>(x.numel() / channels), xd.options());
  const at::Tensor total = sum_over_replicas(torch::cat({xd.sum({0, 2, 3}), xd.square().sum({0, 2, 3}), count}), sum_);
  const at::Tensor n = total.narrow(0, 2 * channels, 1).detach();
  const at::Tensor mean = total.narrow(0, 0, channels) / n;
  const at::Tensor var = (total.narrow(0, channels, channels) / n - mean.square()).clamp_min(0);
  {
    torch::NoGradGuard no_grad;
    running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype()), momentum);
    const at::Tensor unbiased = var.detach() * n / (n - 1).clamp_min(1);
    running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype()), momentum);
  }
  const at::Tensor scale = (var + eps).rsqrt().to(x.scalar_type()) * weight;
  const at::Tensor shift = bias - mean.to(x.scalar_type()) * scale;
  return x * scale.view({1, channels, 1, 1}) + shift.view({1, channels, 1, 1});
}

}  // namespace ddplab::models
