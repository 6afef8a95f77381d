#include "ddplab/train/evaluator.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

namespace ddplab::train {

Evaluator::Evaluator(const config::LogSpec& log, double ema_decay, int64_t steps_per_epoch, Parts parts)
    : every_(log.eval_every_steps), steps_per_epoch_(steps_per_epoch), p_(std::move(parts)), model_(p_.net, ema_decay) {
  const int64_t size = on_validation() ? p_.data.validation.size() : p_.faults.test_samples(p_.data.test.size());
  point_samples_ = log.eval_samples > 0 ? std::min(log.eval_samples, size) : size;
}

Evaluation Evaluator::at_epoch_end() {
  Evaluation e;
  const auto drift = model_.evaluate_with(p_.sync.epoch_view(), [&] {
    put_rank0_buffers();
    e = evaluate_sets(p_.net, p_.data, p_.on_device, p_.faults.test_samples(p_.data.test.size()), p_.replicas.ids(),
                      p_.replicas.count(), p_.faults, p_.bf16);
  });
  e.drift = drift;
  return e;
}

std::optional<EvalPoint> Evaluator::at_step(int64_t step) {
  if (!enabled() || ((step + 1) % every_ != 0 && step + 1 != steps_per_epoch_)) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  SetSums sums;
  model_.evaluate_with(p_.sync.epoch_view(), [&] {
    put_rank0_buffers();
    sums =
        evaluate_first(p_.net, point_set(), point_samples_, p_.replicas.ids(), p_.replicas.count(), p_.faults, p_.bf16);
  });
  p_.net.model->train();
  auto both = torch::stack({sums.loss_sum, sums.correct.to(torch::kFloat64)}).cpu();
  if (p_.comm) distributed::allreduce_sum(*p_.comm, both);
  const auto t = both.accessor<double, 1>();
  const auto n = static_cast<double>(point_samples_);
  return EvalPoint{t[0] / n, t[1] / n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

nlohmann::json Evaluator::manifest_entry() const {
  return {{"every_steps", every_}, {"set", on_validation() ? "validation" : "test"}, {"samples", point_samples_}};
}

void Evaluator::put_rank0_buffers() {
  if (p_.buffer_broadcast) (*p_.buffer_broadcast)(*p_.comm, 0);
}

EvalSplit Evaluator::point_set() const {
  const data::DeviceData* d = p_.on_device;
  if (on_validation()) return {p_.data.validation, d ? &d->validation : nullptr};
  return {p_.data.test, d ? &d->test : nullptr};
}

}  // namespace ddplab::train
