// replicas.cuda_graph: one replica's training step captured once in a CUDA graph and replayed
// every later step (runtime::StepGraph), so that the host launches one graph per step instead of
// each of the step's kernels: what torch.cuda.graph's whole-network capture does, with each batch
// copied into the graph's input tensors before the replay.
//
// The step: GradReducer::prepare_for_backward(), the trainer's forward, loss and backward (its
// ForwardBackward, which ends with GradReducer::finalize()), the batch's correct predictions, the
// squared norm of the gradient, and the optimizer's update in its device-scalar form
// (DeviceScalarStep, optimizer.h). Every step of the run takes that form, captured or not, so a
// replay computes what the same step run eagerly computes.
//
// What a replay cannot do, the host does around it: DeviceScalarStep::prepare() writes the step's
// lr and bias corrections into the device tensors the graph reads; the step's loss, correct count
// and squared norm come back as the graph's output tensors, which the trainer adds to the epoch's
// sums after each replay (those sums are made afresh every epoch, the graph's outputs once); a
// replay runs no autograd hook, so GradReducer::note_replayed_step() marks what the captured
// backward marked. Dropout draws from the device's default generator, which a capture registers,
// so each replay draws new masks.
//
// The first kEagerSteps steps of a process run eagerly (each kernel's first call, cuBLAS's and
// cuDNN's workspaces, the optimizer's state), the next one is captured and replayed, the later
// ones replayed. A step is run eagerly when the caller asks (a clean stop: the capture froze the
// stop slot at 0). On a CPU every step runs eagerly: the arithmetic of a replay, without a graph.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/runtime/device.h"
#include "ddplab/train/network.h"
#include "ddplab/train/optimizer.h"

namespace ddplab::train {

class GraphedStep {
 public:
  static constexpr int kEagerSteps = 3;

  // What a step gives the trainer: 0-dim tensors on the device.
  struct Outputs {
    at::Tensor loss;     // the batch's mean loss
    at::Tensor correct;  // int64: the batch's correct predictions
    at::Tensor grad_sq;  // |gradient|^2, before the update
  };
  // From the batch (x [B, C, H, W], y [B]) to the logits and the mean loss, the gradient in the
  // reducer's buckets, as they are when the optimizer steps.
  using ForwardBackward = std::function<std::pair<at::Tensor, at::Tensor>(const at::Tensor& x, const at::Tensor& y)>;

  // Makes the graph's stream current on this thread until destruction (runtime::StepGraph).
  // `net` (its optimizer made by make_optimizer) and `reducer` must outlive this.
  GraphedStep(Network& net, distributed::GradReducer& reducer, ForwardBackward forward_backward);

  // One training step on (x, y) at learning rate `lr`: eagerly (the first kEagerSteps, on a CPU,
  // or when `eager`), captured and replayed (the next), or replayed. The outputs of a replay are
  // the same tensors every step: read them before the next step.
  Outputs step(const at::Tensor& x, const at::Tensor& y, double lr, bool eager);
  // Whether the step has been captured (never on a CPU).
  bool captured() const { return graph_.captured(); }

 private:
  // The step's kernels on (x, y); `lr`: prepare the optimizer's numbers once the gradients are
  // there (an eager step), or null (a captured one: prepared before, on the host).
  Outputs run(const at::Tensor& x, const at::Tensor& y, const double* lr);

  runtime::StepGraph graph_;
  DeviceScalarStep& optimizer_;
  distributed::GradReducer& reducer_;
  ForwardBackward forward_backward_;
  int64_t eager_steps_ = 0;
  at::Tensor x_, y_;  // the graph's inputs
  Outputs outputs_;   // the graph's outputs
};

}  // namespace ddplab::train
