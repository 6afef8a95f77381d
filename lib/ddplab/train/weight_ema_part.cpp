// model.ema_decay's weight EMA (weight_ema.h, kept by the EpochModel) as a part: folded in after
// every optimizer update, before any averaging, and kept in checkpoints (weight_ema,
// weight_ema_buffers).
#include <memory>

#include "ddplab/train/epoch_model.h"
#include "ddplab/train/part.h"

namespace ddplab::train {
namespace {

class WeightEmaPart : public Part {
 public:
  explicit WeightEmaPart(const PartContext& c) : model_(c.epoch_model) {}

  void after_update(const StepUpdate& u) override { model_.after_step(u.global_step); }
  void save(PartState& state) override { model_.save_to(state); }
  void load(const PartState& state, const std::filesystem::path& /*file*/) override { model_.restore_from(state); }

 private:
  EpochModel& model_;
};

std::unique_ptr<Part> make(const PartContext& c) {
  if (c.spec.model.ema_decay <= 0) return nullptr;
  return std::make_unique<WeightEmaPart>(c);
}

}  // namespace

DDPLAB_REGISTER_PART(weight_ema, &make);

}  // namespace ddplab::train
