#include "ddplab/distributed/param_average.h"

#include <cmath>

#include <torch/torch.h>

namespace ddplab::distributed {

ParamAverager::ParamAverager(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm)
    : params_(std::move(params)), comm_(std::move(comm)) {
  TORCH_INTERNAL_ASSERT(!params_.empty(), "ParamAverager needs parameters");
  torch::NoGradGuard no_grad;
  int64_t numel = 0;
  for (const auto& p : params_) {
    TORCH_INTERNAL_ASSERT(p.scalar_type() == params_[0].scalar_type() && p.device() == params_[0].device(),
                          "ParamAverager: parameters of mixed dtype or device");
    numel += p.numel();
    center_.push_back(p.detach().clone());
  }
  flat_ = torch::zeros({numel + slots_.size()}, params_[0].options().requires_grad(false));
}

void ParamAverager::fill(const std::vector<at::Tensor>& parts, Agreement local) {
  int64_t offset = 0;
  for (const auto& t : parts) {
    flat_.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
    offset += t.numel();
  }
  slots_.write(flat_.narrow(0, offset, slots_.size()), local);
}

Agreement ParamAverager::allreduce_and_read_agreement() {
  if (comm_ && comm_->size > 1) {
    std::vector<at::Tensor> v{flat_};
    comm_->backend->allreduce(v)->wait();
  }
  return slots_.read(flat_.narrow(0, flat_.numel() - slots_.size(), slots_.size()));
}

Agreement ParamAverager::average(Agreement local) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (const auto& p : params_) parts.push_back(p.detach());
  fill(parts, local);
  flat_.div_(replicas());
  const Agreement agreed = allreduce_and_read_agreement();
  int64_t offset = 0;
  for (auto& p : params_) {
    p.detach().copy_(flat_.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
  return agreed;
}

Agreement ParamAverager::elastic_step(double alpha, Agreement local) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> diffs;
  for (size_t i = 0; i < params_.size(); ++i) diffs.push_back(params_[i].detach() - center_[i]);
  fill(diffs, local);
  // The replica's own move needs only its own difference: done before the all-reduce.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].detach().sub_(diffs[i], alpha);
  const Agreement agreed = allreduce_and_read_agreement();
  int64_t offset = 0;
  for (auto& c : center_) {
    c.add_(flat_.narrow(0, offset, c.numel()).view(c.sizes()), alpha);
    offset += c.numel();
  }
  return agreed;
}

void ParamAverager::set_center(const std::vector<at::Tensor>& center) {
  TORCH_INTERNAL_ASSERT(center.size() == center_.size(), "EASGD center: ", center.size(), " tensors for ",
                        center_.size(), " parameters");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < center_.size(); ++i) center_[i].copy_(center[i].view(center_[i].sizes()));
}

ParamAverager::Spread ParamAverager::spread() const {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (const auto& p : params_) parts.push_back(p.detach().reshape({-1}).to(torch::kFloat64));
  const auto local = torch::cat(parts);
  auto mean = local.clone();
  const int n = replicas();
  if (n > 1) {
    std::vector<at::Tensor> v{mean};
    comm_->backend->allreduce(v)->wait();
    mean.div_(n);
  }
  auto sq = (local - mean).pow(2).sum().reshape({1});
  if (n > 1) {
    std::vector<at::Tensor> v{sq};
    comm_->backend->allreduce(v)->wait();
  }
  Spread out;
  const double norm = mean.norm().item<double>();
  out.drift = norm > 0 ? std::sqrt(sq.item<double>() / n) / norm : 0.0;
  int64_t offset = 0;
  for (const auto& p : params_) {
    out.mean.push_back(mean.narrow(0, offset, p.numel()).view(p.sizes()).to(p.scalar_type()));
    offset += p.numel();
  }
  return out;
}

}  // namespace ddplab::distributed
