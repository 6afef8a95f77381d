// The middle of one optimizer step of this process's replicas: rank 0's BatchNorm buffers
// broadcast first (DDP's broadcast_buffers=True), then each replica's shard (local_replicas.h) as
// batch.accumulate_steps micro-batches whose backwards add to GradReducer's buckets (the last one
// all-reduces, when the step reduces), then the update. Eagerly, or, after capture()
// (replicas.cuda_graph), as the GraphedStep replays it.
#pragma once
#include <memory>
#include <optional>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/epoch_totals.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/graphed_step.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/network.h"

namespace ddplab::train {

class StepRunner {
 public:
  // All must outlive it; `comm` null with one process.
  StepRunner(const config::ExperimentSpec& spec, Network& net, distributed::GradReducer& reducer,
             LocalReplicas& replicas, const DebugFaults& faults, std::shared_ptr<distributed::Comm> comm);

  // From now on steps run as a GraphedStep (its stream current from here on; one replica).
  void capture();
  // One step at learning rate `lr` (already set on the optimizer): adds the batch's loss and correct
  // count to `totals` and returns |reduced gradient|^2 (0-dim, on the device). `reduce`: this step
  // all-reduces its gradients; `stop_wanted`: a graphed step runs eagerly.
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& y, bool reduce, bool stop_wanted, EpochTotals& totals);
  // Rank 0's buffers to every rank (2+ processes, a model with buffers); the Evaluator's too.
  void broadcast_buffers();
  distributed::RepeatedBroadcast* buffer_broadcast() { return broadcast_ ? &*broadcast_ : nullptr; }

 private:
  void accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals);
  std::pair<at::Tensor, at::Tensor> forward_backward(const at::Tensor& x, const at::Tensor& y);

  const config::ExperimentSpec& spec_;
  Network& net_;
  distributed::GradReducer& reducer_;
  LocalReplicas& replicas_;
  const DebugFaults& faults_;
  std::shared_ptr<distributed::Comm> comm_;
  std::optional<distributed::RepeatedBroadcast> broadcast_;
  // Last: it waits for its stream before the members above go.
  std::optional<GraphedStep> graphed_;
};

}  // namespace ddplab::train
