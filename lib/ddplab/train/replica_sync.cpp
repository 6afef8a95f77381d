#include "ddplab/train/replica_sync.h"

#include <torch/torch.h>

namespace ddplab::train {

ReplicaSync::ReplicaSync(const config::SyncSpec& spec, int64_t steps_per_epoch, std::vector<at::Tensor> params,
                         std::shared_ptr<distributed::Comm> comm)
    : spec_(spec), steps_per_epoch_(steps_per_epoch) {
  TORCH_INTERNAL_ASSERT(spec_.period >= 1, "sync period must be >= 1, got ", spec_.period);
  if (!talks_every_step()) averager_.emplace(std::move(params), std::move(comm));
}

bool ReplicaSync::local_from(int64_t global_step) const {
  if (spec_.method == config::SyncMethod::kEasgd) return true;
  if (spec_.method == config::SyncMethod::kLocalSgd) return global_step >= spec_.start_epoch * steps_per_epoch_;
  return false;
}

bool ReplicaSync::reduces_gradients(int64_t global_step) const { return !local_from(global_step); }

// The number of local steps done after step `global_step`, counted from the first local step.
static int64_t local_steps_after(const config::SyncSpec& spec, int64_t steps_per_epoch, int64_t global_step) {
  const int64_t first = spec.method == config::SyncMethod::kLocalSgd ? spec.start_epoch * steps_per_epoch : 0;
  return global_step + 1 - first;
}

ReplicaSync::StepResult ReplicaSync::after_step(int64_t global_step, distributed::Agreement local) {
  StepResult r;
  if (!local_from(global_step)) return r;
  if (local_steps_after(spec_, steps_per_epoch_, global_step) % spec_.period != 0) return r;
  r.communicated = true;
  const auto agreed = spec_.method == config::SyncMethod::kEasgd ? averager_->elastic_step(spec_.alpha, local)
                                                                 : averager_->average(local);
  r.stop = agreed.stop;
  r.diverged = agreed.diverged;
  r.bytes = distributed::ring_allreduce_bytes(averager_->payload_bytes(), averager_->replicas());
  return r;
}

bool ReplicaSync::replicas_agree_after(int64_t global_step) const {
  if (!local_from(global_step)) return true;
  return spec_.method == config::SyncMethod::kLocalSgd &&
         local_steps_after(spec_, steps_per_epoch_, global_step) % spec_.period == 0;
}

std::optional<ReplicaSync::EpochView> ReplicaSync::epoch_view() {
  if (!averager_) return std::nullopt;
  auto spread = averager_->spread();
  EpochView v;
  v.drift = spread.drift;
  if (spec_.method == config::SyncMethod::kEasgd) {
    for (const auto& c : averager_->center()) v.eval_params.push_back(c.clone());
  } else {
    v.eval_params = std::move(spread.mean);
  }
  return v;
}

std::vector<at::Tensor> ReplicaSync::center() const {
  if (spec_.method != config::SyncMethod::kEasgd) return {};
  return averager_->center();
}

void ReplicaSync::set_center(const std::vector<at::Tensor>& center) {
  if (spec_.method == config::SyncMethod::kEasgd && !center.empty()) averager_->set_center(center);
}

}  // namespace ddplab::train
