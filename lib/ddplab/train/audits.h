// The trainer's per-epoch audits (cheap), each a function that throws AuditFailure naming the
// culprit:
//   (a) replica consistency: a checksum per parameter compared across ranks
//       (distributed/consistency.h); a mismatch names the first parameter that differs (towers
//       that do not share weights). `what` names the tensors in the message: "parameter", or
//       "EASGD center variable of parameter".
//   (b) gradient: every trainable parameter received a gradient during the epoch (GradReducer's
//       received_grad()), else it is not used in forward or the loss is not connected to it.
//   (c) update: every trainable parameter changed during the epoch (compared with a snapshot
//       taken at its start), else its gradients were exactly zero or the optimizer skipped it (an
//       averaging loop that updated only the first variable). Under plain SGD a parameter passes
//       unchanged when the largest step its last gradient could take is lost in the float's
//       rounding: a bias before BatchNorm, whose gradient is zero in exact arithmetic and rounding
//       noise in floats. Adam's and AdamW's steps do not shrink with the gradient, and weight decay
//       moves every parameter: no such exemption there.
//   (d) loss: the epoch's mean training loss and accuracy are possible for softmax cross-entropy.
//       A misclassified sample's true class has probability at most 1/2, so it costs at least
//       ln 2; with accuracy below 50% over half the samples do, and the mean is at least
//       (1/2) ln 2 = 0.347. Below that with accuracy below 50%, the loss is not the softmax
//       cross-entropy (a sigmoid with a one-sided loss, say).
// `epoch` is the 1-based epoch the message names. AuditTrail applies debug.audits: under "abort"
// (the default) a failure stops the run; under "warn" its message is kept for the epoch's record
// and training goes on.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/settings.h"
#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"

namespace ddplab::train {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A failed audit is a bug in the training setup, found at run time: exit code 1, not a spec error.
class AuditFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// (a); a collective: every rank of `comm` calls it with the same names.
void check_replica_consistency(distributed::Comm& comm, const NamedTensors& named, int epoch, const std::string& what);

// (b) and (c) for every parameter of `named` that requires a gradient, in order (the first
// failing parameter is named; for one parameter (b) comes before (c)). `snapshot[i]` is
// parameter i at the epoch's start, `received[i]` whether it got a gradient since.
// `step_bound`: sgd_step_bound() of the run's optimizer; 0: no parameter passes unchanged.
void check_gradients_and_updates(const NamedTensors& named, const std::vector<at::Tensor>& snapshot,
                                 const std::vector<bool>& received, int epoch, double step_bound = 0);

// The most one step moves a parameter per unit of gradient under `optimizer` when it is SGD
// without weight decay: `peak_lr` (the epoch's largest lr) / (1 - momentum), Nesterov's too.
// 0 for Adam, AdamW, or any weight decay.
double sgd_step_bound(const config::OptimizerSpec& optimizer, double peak_lr);

// (d): `train_loss` the epoch's mean training loss, `train_acc` its accuracy in [0, 1].
void check_loss_is_cross_entropy(double train_loss, double train_acc, int epoch);

// Runs the audits under a mode: kAbort rethrows an AuditFailure, kWarn keeps its message (the
// messages name the audit, the epoch and what was found) and lets training go on.
class AuditTrail {
 public:
  explicit AuditTrail(config::AuditMode mode = config::AuditMode::kAbort) : mode_(mode) {}

  // Calls `audit()` (a check_* call above); returns whether it passed.
  template <class Audit>
  bool run(Audit&& audit) {
    try {
      audit();
      return true;
    } catch (const AuditFailure& e) {
      if (mode_ == config::AuditMode::kAbort) throw;
      warnings_.emplace_back(e.what());
      return false;
    }
  }

  // The messages of the failures since the last take(), oldest first; empties them.
  std::vector<std::string> take() { return std::exchange(warnings_, {}); }

  // Local SGD: the replica consistency audit of an epoch waits for the replicas' next agreement
  // (an averaging point); the trainer defers it and runs it there.
  void defer_replica_check(bool deferred = true) { replica_check_deferred_ = deferred; }
  bool replica_check_deferred() const { return replica_check_deferred_; }

 private:
  config::AuditMode mode_;
  std::vector<std::string> warnings_;
  bool replica_check_deferred_ = false;
};

}  // namespace ddplab::train
