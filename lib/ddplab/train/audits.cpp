#include "ddplab/train/audits.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/distributed/consistency.h"

namespace ddplab::train {

void check_replica_consistency(distributed::Comm& comm, const NamedTensors& named, int epoch, const std::string& what) {
  const auto mismatch = distributed::first_replica_mismatch(comm, named);
  if (!mismatch) return;
  throw AuditFailure(fmt::format(
      "replica consistency audit failed after epoch {}: {} '{}' differs between replicas (checksums from {:f} to "
      "{:f}); the replicas do not share weights (was rank 0's model broadcast at start?)",
      epoch, what, mismatch->name, mismatch->lo, mismatch->hi));
}

void check_loss_is_cross_entropy(double train_loss, double train_acc, int epoch) {
  const double floor = 0.5 * std::log(2.0);
  if (train_acc < 0.5 && train_loss < floor)
    throw AuditFailure(fmt::format(
        "loss audit failed in epoch {}: a training loss of {:.4f} with {:.2f}% training accuracy is impossible for "
        "softmax cross-entropy (each misclassified sample costs at least ln 2, over half were misclassified, so the "
        "mean is at least {:.4f}): the loss is not the cross-entropy of the model's softmax outputs (a sigmoid "
        "with a one-sided loss?)",
        epoch, train_loss, 100 * train_acc, floor));
}

namespace {

// Whether the largest step `grad` could take under SGD leaves `p` as it is in its float type.
bool lost_in_rounding(const at::Tensor& p, const at::Tensor& grad, double step_bound) {
  return step_bound > 0 && grad.defined() && torch::equal(p, p - grad * step_bound);
}

}  // namespace

double sgd_step_bound(const config::OptimizerSpec& optimizer, double peak_lr) {
  if (optimizer.name != config::OptimizerName::kSgd || optimizer.weight_decay != 0 ||
      !optimizer.weight_decay_groups.empty())
    return 0;
  return peak_lr / (1 - optimizer.momentum);
}

void check_gradients_and_updates(const NamedTensors& named, const std::vector<at::Tensor>& snapshot,
                                 const std::vector<bool>& received, int epoch, double step_bound) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, p] = named[i];
    if (!p.requires_grad()) continue;
    if (!received[i])
      throw AuditFailure(
          fmt::format("gradient audit failed in epoch {}: parameter '{}' received no gradient (is it "
                      "used in forward? is the loss connected to it?)",
                      epoch, name));
    const auto& grad = p.grad();
    if (torch::equal(p, snapshot[i]) && grad.defined() && !grad.any().item<bool>())
      throw AuditFailure(fmt::format(
          "update audit failed in epoch {}: parameter '{}' did not change: its gradients were exactly zero (constant "
          "inputs, such as all-zero images? a layer whose ReLUs are all dead?)",
          epoch, name));
    if (torch::equal(p, snapshot[i]) && !lost_in_rounding(p, grad, step_bound))
      throw AuditFailure(fmt::format(
          "update audit failed in epoch {}: parameter '{}' did not change although it received gradients; the "
          "optimizer did not update it (a gradient-averaging loop that returns after the first variable?)",
          epoch, name));
  }
}

}  // namespace ddplab::train
