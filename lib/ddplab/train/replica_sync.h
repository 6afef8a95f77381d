// replicas.sync over the steps of a run: which steps all-reduce their gradients, when the
// replicas average their parameters (local SGD) or make their elastic step (EASGD), and what the
// epoch-end evaluation and replica-consistency audit look at.
//
//   allreduce   every step all-reduces its gradients (DDP); the replicas stay bit-identical.
//   local_sgd   (post-local SGD) steps before epoch start_epoch all-reduce their gradients; from
//               then on each replica steps on its own gradient, and after every `period` local
//               steps (counted from the first local step, across epoch ends) the parameters are
//               averaged. Optimizer state stays local. Evaluation uses the replicas' mean
//               parameters; the consistency audit runs at the first point after each epoch's end
//               where the replicas agree (an all-reduced step or an averaging point; never when
//               training ends before one).
//   easgd       no gradient all-reduce; after every `period` steps the elastic step (ParamAverager::
//               elastic_step). Evaluation and the saved model use the center variable, and the
//               audit checks that the center is identical on every rank.
//
// Steps are identified by the run's global step (0-based), so the schedule needs no state and
// survives resume.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/param_average.h"

namespace ddplab::train {

class ReplicaSync {
 public:
  // `params` updated in place; `comm` null with one replica.
  ReplicaSync(const config::SyncSpec& spec, int64_t steps_per_epoch, std::vector<at::Tensor> params,
              std::shared_ptr<distributed::Comm> comm);

  config::SyncMethod method() const { return spec_.method; }
  bool talks_every_step() const { return spec_.method == config::SyncMethod::kAllreduce; }
  // Whether step `global_step` all-reduces its gradients.
  bool reduces_gradients(int64_t global_step) const;

  struct StepResult {
    bool communicated = false;  // parameters were averaged / elastic step made
    bool stop = false;          // a rank asked to stop (agreed through the averaging all-reduce)
    bool diverged = false;      // a rank's local gradient diverged (agreed there too)
    int64_t bytes = 0;          // bytes this rank sent for it (ring all-reduce model)
  };
  // After the optimizer step of `global_step`: the averaging or elastic step, if one is due,
  // carrying this rank's stop request and divergence (distributed/agreement.h).
  StepResult after_step(int64_t global_step, distributed::Agreement local);
  // Whether the replicas hold identical parameters after step `global_step` (all-reduced or
  // averaged there).
  bool replicas_agree_after(int64_t global_step) const;

  // Epoch end (every rank calls it, in step): for local_sgd and easgd the replicas' drift
  // (ParamAverager::spread) and the parameters to evaluate and save (their mean for local_sgd, the
  // center for easgd); nothing for allreduce.
  struct EpochView {
    double drift = 0;
    std::vector<at::Tensor> eval_params;
  };
  std::optional<EpochView> epoch_view();

  // EASGD's center (empty otherwise), for checkpoints.
  std::vector<at::Tensor> center() const;
  void set_center(const std::vector<at::Tensor>& center);

 private:
  bool local_from(int64_t global_step) const;

  config::SyncSpec spec_;
  int64_t steps_per_epoch_;
  std::optional<distributed::ParamAverager> averager_;
};

}  // namespace ddplab::train
