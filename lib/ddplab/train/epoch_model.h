// The weights an epoch is evaluated and saved with: the replica's own under all-reduce, the
// replicas' mean under local SGD, the center under EASGD (ReplicaSync::epoch_view), and with
// model.ema_decay the weight EMA's average, evaluated with its averaged BatchNorm statistics
// (weight_ema.h). evaluate_with() puts them into the model for one evaluation and puts training's
// own weights back; the last weights evaluated are kept, so the saved model (model.pt) and the
// best epoch's (best.pt) are the ones whose accuracy the records hold.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/train/checkpoint.h"
#include "ddplab/train/network.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/weight_ema.h"

namespace ddplab::train {

class EpochModel {
 public:
  // `network` must outlive this; ema_decay 0: no weight EMA.
  EpochModel(const Network& network, double ema_decay);

  // After optimizer step `global_step` (0-based): folds the weights into the EMA, if there is one.
  void after_step(int64_t global_step);

  // Runs `evaluate` with the epoch's weights in the model: `view`'s (local SGD / EASGD; every rank
  // got it from ReplicaSync::epoch_view in step), else the EMA's, else the model's own. Returns
  // the replicas' drift of `view`.
  std::optional<double> evaluate_with(std::optional<ReplicaSync::EpochView> view,
                                      const std::function<void()>& evaluate);
  // Calls `use` with the last evaluated weights in the model, then puts training's own back.
  void with_evaluated(const std::function<void()>& use);
  // Puts the last evaluated weights into the model for good (training is over).
  void restore_evaluated();

  // The EMA's averages into / out of a checkpoint (nothing without an EMA).
  void save_to(PartState& state) const;
  void restore_from(const PartState& state);

 private:
  const Network& net_;
  std::optional<WeightEma> ema_;
  std::vector<at::Tensor> evaluated_params_;   // empty: the model's own were evaluated
  std::vector<at::Tensor> evaluated_buffers_;  // weight EMA: the averaged BatchNorm statistics
};

}  // namespace ddplab::train
