// What the Trainer evaluates, when, and with which weights (evaluate.h computes the sums):
//   - at every epoch's end (at_epoch_end): the test set and the validation split, each replica's
//     slice; the Trainer all-reduces the sums with the epoch's training sums;
//   - with log.eval_every_steps K > 0, evaluation points (at_step) after every K-th step of an
//     epoch and after its last, where step records close (StepRecorder): the first
//     log.eval_samples images (0: all) of the validation split with dataset.validation, else of
//     the test set as far as the epoch's end evaluates it (debug fault eval_first_half halves it).
//     The same images at every point, so that the points compare; an accuracy on n images has a
//     sampling error of sqrt(p (1 - p) / n). The manifest names them (manifest_entry).
// Both take the weights of its EpochModel (the replica's own, the replicas' mean under local SGD, the
// EASGD center, the weight EMA's average with its BatchNorm statistics) as they are after the
// step, its averaging or elastic step included (the Trainer calls at_step after
// ReplicaSync::after_step), and rank 0's BatchNorm
// statistics, broadcast first as every training forward does anyway, in eval mode without
// autograd: no dropout mask is drawn and no statistic moves, and training's own weights are put
// back, so a run's training is the same with points and without. The epoch's end evaluates last,
// so the weights the EpochModel keeps for model.pt and best.pt are the epoch's.
//
// Collectives (every rank calls both, in step): the EpochModel's view (local SGD / EASGD: two
// all-reduces), the buffer broadcast; at a point also the all-reduce of its sums, read back at
// once (a host sync per point, never per step).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/device_data.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/train/epoch_model.h"
#include "ddplab/train/evaluate.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/network.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/step_log.h"

namespace ddplab::train {

class Evaluator {
 public:
  // The Trainer's parts it evaluates with; all must outlive the Evaluator.
  struct Parts {
    Network& net;
    const data::DatasetPair& data;
    const data::DeviceData* on_device;  // the splits where batches are made on the device, else null
    ReplicaSync& sync;
    const LocalReplicas& replicas;
    std::shared_ptr<distributed::Comm> comm;  // null for one process
    // The broadcast of rank 0's BatchNorm buffers the Trainer runs before every forward; null
    // with one process or no buffers.
    distributed::RepeatedBroadcast* buffer_broadcast;
    const DebugFaults& faults;
    bool bf16 = false;  // precision bf16: under autocast
  };
  // `ema_decay`: model.ema_decay (0: no weight EMA).
  Evaluator(const config::LogSpec& log, double ema_decay, int64_t steps_per_epoch, Parts parts);

  // The weights evaluated (and saved as model.pt and best.pt).
  EpochModel& epoch_model() { return model_; }

  // The epoch's end: the test set's first DebugFaults::test_samples and the whole validation
  // split, this process's replicas' slices, sums not yet all-reduced; `drift` from the EpochModel.
  Evaluation at_epoch_end();
  // After step `step` of the epoch (0-based): the evaluation point there, all-reduced, with the
  // seconds it took; nullopt when none falls there. Leaves the model in train mode.
  std::optional<EvalPoint> at_step(int64_t step);

  bool enabled() const { return every_ > 0; }
  // manifest.json's "step_eval": {"every_steps": K, "set": "validation" | "test", "samples": n}.
  nlohmann::json manifest_entry() const;

 private:
  void put_rank0_buffers();
  EvalSplit point_set() const;
  // Points evaluate the validation split when there is one, else the test set.
  bool on_validation() const { return p_.data.validation.size() > 0; }

  int64_t every_, steps_per_epoch_;
  Parts p_;
  EpochModel model_;
  int64_t point_samples_;  // images per point
};

}  // namespace ddplab::train
