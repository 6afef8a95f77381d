#include "ddplab/distributed/consistency.h"

#include <torch/torch.h>

namespace ddplab::distributed {

std::optional<ReplicaMismatch> first_replica_mismatch(Comm& comm,
                                                      const std::vector<std::pair<std::string, at::Tensor>>& named) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> sums;
  for (const auto& [name, p] : named) {
    auto d = p.detach().to(torch::kCPU, torch::kFloat64);
    sums.push_back(d.sum().reshape({1}));
    sums.push_back(d.pow(2).sum().reshape({1}));
  }
  auto local = torch::cat(sums);
  // max of (x, -x) gives max and -min in one all-reduce.
  auto both = torch::cat({local, -local});
  allreduce_max(comm, both);
  auto n = local.numel();
  auto hi = both.narrow(0, 0, n), lo = -both.narrow(0, n, n);
  auto differs = (hi != lo).nonzero();
  if (differs.numel() == 0) return std::nullopt;
  const auto k = static_cast<size_t>(differs[0][0].item<int64_t>() / 2);
  const auto j = static_cast<int64_t>(2 * k);
  return ReplicaMismatch{k, named[k].first, lo[j].item<double>(), hi[j].item<double>()};
}

}  // namespace ddplab::distributed
