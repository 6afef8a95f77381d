#include "ddplab/distributed/agreement.h"

#include <torch/torch.h>

namespace ddplab::distributed {

void ControlSlots::write(const at::Tensor& slots, Agreement local) const {
  slots[0].fill_(local.stop ? 1.0 : 0.0);
  if (layout_.diverged) slots[1].fill_(local.diverged ? 1.0 : 0.0);
}

void ControlSlots::write_local_norm(const at::Tensor& slots, const at::Tensor& norm_squared) const {
  TORCH_INTERNAL_ASSERT(layout_.local_norm, "ControlSlots: no local norm slot");
  slots[size() - 1].copy_(norm_squared);
}

at::Tensor ControlSlots::local_norm(const at::Tensor& slots) const {
  TORCH_INTERNAL_ASSERT(layout_.local_norm, "ControlSlots: no local norm slot");
  return slots[size() - 1];
}

Agreement ControlSlots::read(const at::Tensor& slots) const {
  const auto host = slots.narrow(0, 0, size()).to(torch::kCPU, torch::kDouble);
  return {host[0].item<double>() > 0, layout_.diverged && host[1].item<double>() > 0};
}

}  // namespace ddplab::distributed
