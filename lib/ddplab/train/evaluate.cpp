#include "ddplab/train/evaluate.h"

#include <torch/torch.h>

#include "ddplab/data/loader.h"
#include "ddplab/train/autocast.h"

namespace ddplab::train {
namespace {

SetSums evaluate_set(Network& net, const data::Dataset& set, int64_t samples, const std::vector<int>& ids, int count,
                     const DebugFaults& faults) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(net.device);
  SetSums sums{torch::zeros({}, f64), torch::zeros({}, f64.dtype(torch::kInt64))};
  for (int r : ids) {
    const auto [begin, end] = data::eval_shard(samples, r, count);
    for (int64_t b = begin; b < end; b += 1000) {
      auto idx = torch::arange(b, std::min(b + 1000, end), torch::kInt64);
      auto batch = data::make_batch(set, idx, *net.transform, /*train=*/false);
      batch.x = batch.x.to(net.device);
      batch.y = batch.y.to(net.device);
      auto logits = net.model->forward(batch.x);
      sums.loss_sum += faults.loss(logits, batch.y, at::Reduction::Sum).to(torch::kFloat64);
      sums.correct += (logits.argmax(1) == batch.y).sum();
    }
  }
  return sums;
}

}  // namespace

Evaluation evaluate_sets(Network& net, const data::DatasetPair& data, int64_t test_samples, const std::vector<int>& ids,
                         int count, const DebugFaults& faults, bool bf16) {
  Evaluation e{evaluate_first(net, data.test, test_samples, ids, count, faults, bf16), std::nullopt, std::nullopt};
  if (data.validation.size() > 0)
    e.validation = evaluate_first(net, data.validation, data.validation.size(), ids, count, faults, bf16);
  return e;
}

SetSums evaluate_first(Network& net, const data::Dataset& set, int64_t samples, const std::vector<int>& ids, int count,
                       const DebugFaults& faults, bool bf16) {
  net.model->eval();
  torch::NoGradGuard no_grad;
  AutocastScope autocast(net.device.type(), bf16);
  return evaluate_set(net, set, samples, ids, count, faults);
}

}  // namespace ddplab::train
