// The denormal note (subnormal_state.h) as a part: on an x86 CPU without replicas.flush_denormal,
// rank 0 counts its optimizer state's denormal floats at each epoch's end until 1% or more of its
// values are, then notes how many and where most are, once a run (docs/performance.md,
// "Denormal numbers").
#include <memory>

#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/run_writer.h"
#include "ddplab/train/subnormal_state.h"

namespace ddplab::train {
namespace {

class SubnormalNotePart : public Part {
 public:
  explicit SubnormalNotePart(const PartContext& c) : c_(c) {}

  void end_epoch(const rundir::EpochRecord& rec) override {
    if (noted_) return;
    if (const auto note = subnormal_note(subnormal_state(*c_.net.optimizer, c_.net.named), rec.epoch)) {
      c_.writer.note(*note);
      noted_ = true;
    }
  }

 private:
  PartContext c_;
  bool noted_ = false;
};

std::unique_ptr<Part> make(const PartContext& c) {
  if (!kDenormalsAssisted || c.spec.replicas.flush_denormal || !c.net.device.is_cpu() || !c.writer.lead())
    return nullptr;
  return std::make_unique<SubnormalNotePart>(c);
}

}  // namespace

DDPLAB_REGISTER_PART(subnormal_note, &make);

}  // namespace ddplab::train
