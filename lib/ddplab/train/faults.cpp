#include "ddplab/train/faults.h"

#include <csignal>
#include <stdexcept>

#include <fmt/format.h>

#include "ddplab/train/loss.h"

namespace ddplab::train {

DebugFaults::DebugFaults(const config::DebugSpec& debug, int rank, bool resumed)
    : debug_(debug), rank_(rank), armed_(!resumed) {}

bool DebugFaults::due(config::Fault fault, int64_t global_step) const {
  return armed_ && debug_.has(fault) && rank_ == debug_.rank && global_step == debug_.step;
}

void DebugFaults::before_step(int64_t global_step) const {
  if (due(config::Fault::kCrash, global_step)) std::raise(SIGKILL);
  if (due(config::Fault::kThrow, global_step))
    throw std::runtime_error(fmt::format("injected fault (debug.fault=throw) at step {}", global_step));
}

bool DebugFaults::stop_wanted(int64_t global_step) {
  stop_fired_ = stop_fired_ || due(config::Fault::kStop, global_step);
  return stop_fired_;
}

void DebugFaults::on_gradients(const std::vector<at::Tensor>& params) const {
  if (!debug_.has(config::Fault::kUpdateFirstOnly)) return;
  for (size_t i = 1; i < params.size(); ++i) params[i].mutable_grad() = at::Tensor();
}

at::Tensor DebugFaults::loss(const at::Tensor& logits, const at::Tensor& y, int64_t reduction) const {
  return debug_.has(config::Fault::kOneSidedSigmoidLoss) ? one_sided_sigmoid_loss(logits, y, reduction)
                                                         : cross_entropy(logits, y, reduction);
}

int64_t DebugFaults::test_samples(int64_t size) const {
  return debug_.has(config::Fault::kEvalFirstHalf) ? size / 2 : size;
}

}  // namespace ddplab::train
