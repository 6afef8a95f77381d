#include "ddplab/train/prewarm.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "ddplab/runtime/device.h"
#include "ddplab/train/autocast.h"

namespace ddplab::train {
namespace {

// A training batch's shape: the model's input for one sample, `batch` times.
std::pair<at::Tensor, at::Tensor> zero_batch(const Network& net, const EvalSplit& test, int64_t batch) {
  const data::Batch one = eval_batch(net, test, 0, 1);
  std::vector<int64_t> shape = one.x.sizes().vec();
  shape[0] = batch;
  return {torch::zeros(shape, one.x.options()), torch::zeros({batch}, one.y.options())};
}

void train_passes(Network& net, const at::Tensor& x, const at::Tensor& y, int steps, const DebugFaults& faults,
                  bool bf16) {
  std::vector<at::Tensor> trainable;
  for (const auto& p : net.params)
    if (p.requires_grad()) trainable.push_back(p);
  net.model->train();
  for (int s = 0; s < steps; ++s) {
    at::Tensor loss;
    {
      AutocastScope autocast(net.device.type(), bf16);
      loss = faults.loss(net.model->forward(x), y, at::Reduction::Mean);
    }
    torch::autograd::grad({loss}, trainable, {}, /*retain_graph=*/false, /*create_graph=*/false,
                          /*allow_unused=*/true);
  }
}

// What a training forward moves, kept and put back: by restore(), or, when the passes threw, by
// the destructor (whose own failure would hide theirs).
class KeptState {
 public:
  explicit KeptState(Network& net) : net_(net), generator_(dropout_generator(net.device)) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    rng_state_ = generator_.get_state();
    for (const auto& b : net.buffers) buffers_.push_back(b.clone());
  }
  ~KeptState() {
    if (restored_) return;
    try {
      restore();
    } catch (...) {
    }
  }
  KeptState(const KeptState&) = delete;
  KeptState& operator=(const KeptState&) = delete;

  void restore() {
    restored_ = true;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) net_.buffers[i].copy_(buffers_[i]);
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(rng_state_);
  }

 private:
  Network& net_;
  at::Generator generator_;
  at::Tensor rng_state_;
  std::vector<at::Tensor> buffers_;
  bool restored_ = false;
};

}  // namespace

double prewarm(Network& net, const EvalSplit& test, int64_t batch, int steps, const DebugFaults& faults, bool bf16) {
  const auto start = std::chrono::steady_clock::now();
  KeptState kept(net);
  const auto [x, y] = zero_batch(net, test, batch);
  train_passes(net, x, y, steps, faults, bf16);
  evaluate_first(net, test, std::min<int64_t>(test.host.size(), 1000), {0}, 1, faults, bf16);
  kept.restore();
  runtime::synchronize(net.device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ddplab::train
