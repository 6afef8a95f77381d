// BatchNorm2d whose batch statistics may span all replicas (model.sync_bn).
//
// Per replica (sync = false) it is torch::nn::BatchNorm2d with its defaults (eps 1e-5, momentum
// 0.1, affine, running statistics): training normalizes [B, C, H, W] with this replica's batch
// mean and biased variance per channel and updates running_mean / running_var (unbiased variance);
// eval normalizes with the running statistics. Parameters weight [C] (ones) and bias [C] (zeros);
// buffers running_mean [C], running_var [C], num_batches_tracked (int64 scalar), as torch names them.
// Under DDP each replica then normalizes with the statistics of its own B/N samples: one real
// cause of 1-vs-N differences (the trainer broadcasts rank 0's buffers before every forward, as
// DDP's broadcast_buffers=True does).
//
// Synchronized (sync = true), training: the per-channel sum and sum of squares of the local batch
// (in float64) and the local count are summed over all replicas by the shared ReplicaSum, and
// every replica normalizes with the global mean and variance and updates its running statistics
// from them. The sums go through sum_over_replicas(), whose backward sums their gradients over
// the replicas too, so each replica's input gradient gets the terms that flow through the other
// replicas' outputs: N replicas x B/N compute what one replica x B computes, to rounding
// (torch.nn.SyncBatchNorm's semantics). The same code runs on one replica (empty ReplicaSum),
// so sync_bn means the same arithmetic at every replica count.
#pragma once
#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace ddplab::models {

// Sums a tensor in place over all replicas (a blocking all-reduce; every replica calls it in the
// same order). Empty: one replica, nothing to sum.
using ReplicaSum = std::function<void(at::Tensor&)>;

// A differentiable all-reduce: returns the sum of `local` over all replicas (its value exactly
// what `sum` produces); in backward the incoming gradient is summed over the replicas as well (a
// hook on the result), which is the gradient of sum_r loss_r with respect to this replica's
// `local`. With an empty `sum` it returns `local`.
at::Tensor sum_over_replicas(const at::Tensor& local, const std::shared_ptr<const ReplicaSum>& sum);

class BatchNorm2dImpl : public torch::nn::Module {
 public:
  // `sum` is read at every forward, so the caller may fill it in after construction.
  BatchNorm2dImpl(int64_t features, bool sync, std::shared_ptr<const ReplicaSum> sum = nullptr);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps = 1e-5, momentum = 0.1;

 private:
  at::Tensor forward_synced(const at::Tensor& x);
  bool sync_;
  std::shared_ptr<const ReplicaSum> sum_;
};
TORCH_MODULE(BatchNorm2d);

}  // namespace ddplab::models
