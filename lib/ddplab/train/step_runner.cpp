#include "ddplab/train/step_runner.h"

#include <torch/torch.h>

#include "ddplab/train/autocast.h"

namespace ddplab::train {
namespace {

// A batch of `n` samples into the epoch's sums: its mean loss (0-dim float) and correct count. The
// loss in one operator: a float times an integer is exact in float64, so this rounds as
// loss.to(kFloat64) * n added would.
void add_batch(EpochTotals& totals, const at::Tensor& loss, const at::Tensor& correct, int64_t n) {
  totals.loss_sum.add_(loss, n);
  totals.correct += correct;
}

}  // namespace

StepRunner::StepRunner(const config::ExperimentSpec& spec, Network& net, distributed::GradReducer& reducer,
                       LocalReplicas& replicas, const DebugFaults& faults, std::shared_ptr<distributed::Comm> comm)
    : spec_(spec), net_(net), reducer_(reducer), replicas_(replicas), faults_(faults), comm_(std::move(comm)) {
  if (comm_ && comm_->size > 1 && !net_.buffers.empty()) broadcast_.emplace(net_.buffers);
}

void StepRunner::capture() {
  graphed_.emplace(net_, reducer_, [this](const at::Tensor& x, const at::Tensor& y) {
    auto result = forward_backward(x, y);
    faults_.on_gradients(net_.params);
    return result;
  });
}

at::Tensor StepRunner::operator()(const at::Tensor& x, const at::Tensor& y, bool reduce, bool stop_wanted,
                                  EpochTotals& totals) {
  broadcast_buffers();
  if (graphed_) {
    const GraphedStep::Outputs out = graphed_->step(x, y, totals.lr, stop_wanted);
    add_batch(totals, out.loss, out.correct, y.size(0));
    return out.grad_sq;
  }
  replicas_.compute(x, y,
                    [&](const at::Tensor& xs, const at::Tensor& ys) { accumulate_gradients(xs, ys, reduce, totals); });
  at::Tensor grad_sq = reducer_.grad_norm_squared();
  faults_.on_gradients(net_.params);
  net_.optimizer->step();
  return grad_sq;
}

void StepRunner::broadcast_buffers() {
  if (broadcast_) (*broadcast_)(*comm_, 0);
}

// batch.accumulate_steps micro-batches of one replica's shard, as a DDP no_sync() loop: every
// backward adds its gradient of loss / K to the buckets and only the last one all-reduces the sum
// (if this step reduces at all: local SGD and EASGD steps keep local gradients).
void StepRunner::accumulate_gradients(const at::Tensor& x, const at::Tensor& y, bool reduce, EpochTotals& totals) {
  const int64_t micro = x.size(0) / spec_.accumulate_steps;
  for (int64_t m = 0; m < spec_.accumulate_steps; ++m) {
    reducer_.set_require_sync(reduce && m + 1 == spec_.accumulate_steps);
    reducer_.prepare_for_backward(/*accumulate=*/m > 0);
    const bool whole = spec_.accumulate_steps == 1;
    const auto xm = whole ? x : x.narrow(0, m * micro, micro), ym = whole ? y : y.narrow(0, m * micro, micro);
    const auto [logits, loss] = forward_backward(xm, ym);
    torch::NoGradGuard no_grad;
    add_batch(totals, loss, (logits.argmax(1) == ym).sum(), ym.size(0));
  }
}

// Returns the logits and the mean loss; the gradient (of loss / batch.accumulate_steps) is in the
// buckets, and reduced if this backward syncs (GradReducer), when it returns.
std::pair<at::Tensor, at::Tensor> StepRunner::forward_backward(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor logits, loss;
  {
    AutocastScope autocast(net_.device.type(), spec_.precision == config::Precision::kBf16);
    logits = net_.model->forward(x);
    loss = faults_.loss(logits, y, at::Reduction::Mean);
  }
  (spec_.accumulate_steps > 1 ? loss / static_cast<double>(spec_.accumulate_steps) : loss).backward();
  reducer_.finalize();
  return {logits, loss};
}

}  // namespace ddplab::train
