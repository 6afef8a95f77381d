// The gradient noise scale (noise_scale.h) as a part: fed by every step whose gradients were
// all-reduced over 2+ replicas, written into the records of epochs whose last step was, and kept
// in checkpoints as its raw EMAs (gns_trace, gns_grad_sq, gns_steps).
#include <memory>

#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/noise_scale.h"
#include "ddplab/train/part.h"
#include "ddplab/train/replica_sync.h"

namespace ddplab::train {
namespace {

class NoiseScalePart : public Part {
 public:
  explicit NoiseScalePart(const PartContext& c) : c_(c), noise_scale_(c.spec.per_replica_batch, c.spec.global_batch) {}

  void after_update(const StepUpdate& u) override {
    // Under sync_bn a replica's gradient is not that of B/N independent samples (SyncBatchNorm's
    // backward sums the statistics' gradients over the replicas); under PowerSGD the reduced
    // gradient is a low-rank approximation, not the replicas' mean (B_simple came out negative).
    // The estimator's assumptions fail, so nothing is measured (docs/ddp-semantics.md).
    if (!u.reduced || c_.spec.model.sync_bn || c_.spec.replicas.compression != config::Compression::kNone) return;
    noise_scale_.update(c_.replicas.local_norm_squared_mean(),
                        distributed::mean_grad_norm_squared(u.grad_sq, c_.spec.replicas.reduce, c_.replicas.count()));
  }

  void before_record(rundir::EpochRecord& rec) override {
    // Only while the gradients are all-reduced (not in local SGD / EASGD phases): the epoch's last step.
    if (c_.sync.reduces_gradients(rec.step - 1)) add_noise_scale(noise_scale_, rec);
  }

  void save(PartState& state) override {
    state.set("gns_trace", noise_scale_.raw_trace());
    state.set("gns_grad_sq", noise_scale_.raw_grad_sq());
    state.set("gns_steps", static_cast<double>(noise_scale_.steps()));
  }

  void load(const PartState& state, const std::filesystem::path& /*file*/) override {
    noise_scale_.set_state(state.number("gns_trace"), state.number("gns_grad_sq"),
                           static_cast<int64_t>(state.number("gns_steps")));
  }

 private:
  PartContext c_;
  GradNoiseScale noise_scale_;
};

std::unique_ptr<Part> make(const PartContext& c) { return std::make_unique<NoiseScalePart>(c); }

}  // namespace

DDPLAB_REGISTER_PART(noise_scale, &make);

}  // namespace ddplab::train
