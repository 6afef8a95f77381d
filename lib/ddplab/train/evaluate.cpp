#include "ddplab/train/evaluate.h"

#include <torch/torch.h>

#include "ddplab/data/loader.h"
#include "ddplab/train/autocast.h"

namespace ddplab::train {
data::Batch eval_batch(const Network& net, const EvalSplit& split, int64_t begin, int64_t end) {
  if (split.on_device)
    return split.on_device->batch(torch::arange(begin, end, torch::dtype(torch::kLong).device(net.device)));
  auto batch = data::make_batch(split.host, torch::arange(begin, end, torch::kInt64), *net.transform, /*train=*/false);
  return {batch.x.to(net.device), batch.y.to(net.device)};
}

namespace {

SetSums evaluate_set(Network& net, const EvalSplit& split, int64_t samples, const std::vector<int>& ids, int count,
                     const DebugFaults& faults) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(net.device);
  SetSums sums{torch::zeros({}, f64), torch::zeros({}, f64.dtype(torch::kInt64))};
  for (int r : ids) {
    const auto [begin, end] = data::eval_shard(samples, r, count);
    for (int64_t b = begin; b < end; b += 1000) {
      const auto batch = eval_batch(net, split, b, std::min(b + 1000, end));
      auto logits = net.model->forward(batch.x);
      sums.loss_sum += faults.loss(logits, batch.y, at::Reduction::Sum).to(torch::kFloat64);
      sums.correct += (logits.argmax(1) == batch.y).sum();
    }
  }
  return sums;
}

}  // namespace

Evaluation evaluate_sets(Network& net, const data::DatasetPair& data, const data::DeviceData* on_device,
                         int64_t test_samples, const std::vector<int>& ids, int count, const DebugFaults& faults,
                         bool bf16) {
  const EvalSplit test{data.test, on_device ? &on_device->test : nullptr};
  Evaluation e{evaluate_first(net, test, test_samples, ids, count, faults, bf16), std::nullopt, std::nullopt};
  if (data.validation.size() > 0) {
    const EvalSplit validation{data.validation, on_device ? &on_device->validation : nullptr};
    e.validation = evaluate_first(net, validation, data.validation.size(), ids, count, faults, bf16);
  }
  return e;
}

SetSums evaluate_first(Network& net, const EvalSplit& split, int64_t samples, const std::vector<int>& ids, int count,
                       const DebugFaults& faults, bool bf16) {
  net.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(net.device.type(), bf16);
  return evaluate_set(net, split, samples, ids, count, faults);
}

}  // namespace ddplab::train
