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

}  // namespace

double prewarm(Network& net, const EvalSplit& test, int64_t batch, int steps, const DebugFaults& faults, bool bf16) {
  const auto start = std::chrono::steady_clock::now();
  at::Generator generator = dropout_generator(net.device);
  at::Tensor rng_state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    rng_state = generator.get_state();
  }
  std::vector<at::Tensor> buffers;
  for (const auto& b : net.buffers) buffers.push_back(b.clone());

  const auto [x, y] = zero_batch(net, test, batch);
  train_passes(net, x, y, steps, faults, bf16);
  evaluate_first(net, test, std::min<int64_t>(test.host.size(), 1000), {0}, 1, faults, bf16);

  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers.size(); ++i) net.buffers[i].copy_(buffers[i]);
  }
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rng_state);
  }
  runtime::synchronize(net.device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ddplab::train
