#include "ddplab/train/epoch_model.h"

#include <torch/torch.h>

#include "ddplab/train/tensor_lists.h"

namespace ddplab::train {

EpochModel::EpochModel(const Network& network, double ema_decay) : net_(network) {
  if (ema_decay > 0) ema_.emplace(net_.params, ema_decay, net_.floating_buffers());
}

void EpochModel::after_step(int64_t global_step) {
  if (ema_) ema_->update(net_.params, global_step, net_.floating_buffers());
}

std::optional<double> EpochModel::evaluate_with(std::optional<ReplicaSync::EpochView> view,
                                                const std::function<void()>& evaluate) {
  if (ema_) {
    TORCH_INTERNAL_ASSERT(!view, "config refuses model.ema_decay with local SGD / EASGD");
    view = ReplicaSync::EpochView{};
    view->eval_params = clone_all(ema_->averages());
  }
  std::vector<at::Tensor> own_params, own_buffers;
  if (view) {
    own_params = clone_all(net_.params);
    copy_all(net_.params, view->eval_params);
  }
  const std::vector<at::Tensor> stats = ema_ ? net_.floating_buffers() : std::vector<at::Tensor>{};
  if (!stats.empty()) {
    own_buffers = clone_all(stats);
    copy_all(stats, ema_->buffer_averages());
  }
  evaluate();
  if (!stats.empty()) {
    evaluated_buffers_ = clone_all(stats);
    copy_all(stats, own_buffers);
  }
  if (!view) return std::nullopt;
  copy_all(net_.params, own_params);
  evaluated_params_ = std::move(view->eval_params);
  return ema_ ? std::nullopt : std::optional<double>(view->drift);
}

void EpochModel::with_evaluated(const std::function<void()>& use) {
  std::vector<at::Tensor> own_params, own_buffers;
  const std::vector<at::Tensor> stats = net_.floating_buffers();
  if (!evaluated_params_.empty()) own_params = clone_all(net_.params);
  if (!evaluated_buffers_.empty()) own_buffers = clone_all(stats);
  restore_evaluated();
  use();
  if (!own_params.empty()) copy_all(net_.params, own_params);
  if (!own_buffers.empty()) copy_all(stats, own_buffers);
}

void EpochModel::restore_evaluated() {
  if (!evaluated_params_.empty()) copy_all(net_.params, evaluated_params_);
  if (!evaluated_buffers_.empty()) copy_all(net_.floating_buffers(), evaluated_buffers_);
}

void EpochModel::save_to(PartState& state) const {
  if (!ema_) return;
  state.set("weight_ema", ema_->averages());
  state.set("weight_ema_buffers", ema_->buffer_averages());
}

void EpochModel::restore_from(const PartState& state) {
  if (ema_ && !state.list("weight_ema").empty()) ema_->set_averages(state.list("weight_ema"));
  if (ema_ && !state.list("weight_ema_buffers").empty()) ema_->set_buffer_averages(state.list("weight_ema_buffers"));
}

}  // namespace ddplab::train
