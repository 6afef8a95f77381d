// Agreeing across ranks without a collective of its own: flags ride in control slots after the
// payload of an all-reduce the ranks make anyway, the GradReducer's last bucket every step
// (grad_reducer.h) and the ParamAverager's buffer at averaging points (param_average.h). Each
// rank writes its own flags before the all-reduce; after it a flag is > 0 on every rank if any
// rank set it (summed; divided by N first under a mean, still > 0). So every rank stops, or
// diverges, after the same step.
//
// The control slots, in this order, as a ControlSlots layout holds them:
//   stop        always: a rank asked to stop cleanly (SIGINT/SIGTERM, debug fault stop)
//   diverged    with Layout::diverged: a rank's local gradient norm was NaN or Inf (local SGD / EASGD)
//   local norm  with Layout::local_norm: this rank's |local gradient|^2; after the all-reduce the
//               sum over ranks (the gradient noise scale's |G_small|^2, noise_scale.h)
// The GradReducer follows them with one used flag per parameter.
#pragma once
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace ddplab::distributed {

struct Agreement {
  bool stop = false;
  bool diverged = false;
};

class ControlSlots {
 public:
  struct Layout {
    bool diverged = false;
    bool local_norm = false;
  };
  explicit ControlSlots(Layout layout) : layout_(layout) {}

  // How many slots the layout takes.
  int64_t size() const { return 1 + (layout_.diverged ? 1 : 0) + (layout_.local_norm ? 1 : 0); }

  // Device-side writes into `slots` (a 1-D view of size() or more elements), no host sync.
  // Agreement::diverged is written only where the layout has its slot.
  void write(const at::Tensor& slots, Agreement local) const;
  void write_local_norm(const at::Tensor& slots, const at::Tensor& norm_squared) const;

  // After the all-reduce. stop(): a 1-element view (> 0: stop) the host may read later;
  // local_norm(): the 0-dim sum over ranks; read(): both flags, read on the host.
  at::Tensor stop(const at::Tensor& slots) const { return slots.narrow(0, 0, 1); }
  at::Tensor local_norm(const at::Tensor& slots) const;
  Agreement read(const at::Tensor& slots) const;

 private:
  Layout layout_;
};

}  // namespace ddplab::distributed
