// The audits of audits.h over an epoch of the Trainer: the parameters' snapshot at its start; after
// the metrics' all-reduce the replica consistency check (the EASGD center under EASGD; under local
// SGD at the first point at or after the epoch's end where the replicas agree, which may be a later
// step: after_step); at its end the gradient-and-update check and the loss check. A failure throws
// AuditFailure, or under debug.audits "warn" is kept for the epoch's record (audits.h, AuditTrail).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/audits.h"
#include "ddplab/train/lr_schedule.h"
#include "ddplab/train/network.h"
#include "ddplab/train/replica_sync.h"

namespace ddplab::train {

class EpochAudits {
 public:
  // All must outlive it; `comm` null with one process (no replica check).
  EpochAudits(const config::ExperimentSpec& spec, const Network& net, distributed::GradReducer& reducer,
              const ReplicaSync& sync, const LrSchedule& schedule, int64_t steps_per_epoch,
              std::shared_ptr<distributed::Comm> comm);

  // Epoch `index` (0-based) starts: the snapshot, and which parameters receive gradients from now.
  void start_epoch();
  // After global step `global_step` of epoch `index`: a replica check deferred to it, if the replicas agree there.
  void after_step(int index, int64_t global_step);
  // After epoch `index`'s metrics' all-reduce (`global_steps` taken): the replica check (a collective).
  void check_replicas(int index, int64_t global_steps);
  // The epoch's end: the gradient-and-update check (when `trained`: any step of it ran in this
  // process), the loss check of `rec`; returns the failures kept under "warn".
  std::vector<std::string> at_end(int index, bool trained, const rundir::EpochRecord& rec);

 private:
  double peak_lr(int index) const;

  const config::ExperimentSpec& spec_;
  const Network& net_;
  distributed::GradReducer& reducer_;
  const ReplicaSync& sync_;
  const LrSchedule& schedule_;
  int64_t steps_;
  std::shared_ptr<distributed::Comm> comm_;
  AuditTrail trail_;
  std::vector<at::Tensor> snapshot_;  // the parameters at the epoch's start, for the update audit
};

}  // namespace ddplab::train
