#include "ddplab/train/loss.h"

#include <torch/torch.h>

namespace ddplab::train {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels, int64_t reduction) {
  return torch::cross_entropy_loss(logits, labels, {}, reduction);
}

at::Tensor one_sided_sigmoid_loss(const at::Tensor& logits, const at::Tensor& labels, int64_t reduction) {
  TORCH_INTERNAL_ASSERT(reduction == at::Reduction::Mean || reduction == at::Reduction::Sum,
                        "one_sided_sigmoid_loss: reduction Mean or Sum, got ", reduction);
  at::Tensor true_logit = logits.gather(1, labels.unsqueeze(1)).squeeze(1);
  // As autocast runs cross_entropy_loss: in fp32 when the logits are bf16 or fp16.
  if (at::isReducedFloatingType(true_logit.scalar_type())) true_logit = true_logit.to(torch::kFloat);
  const at::Tensor per_sample = torch::softplus(-true_logit);
  return reduction == at::Reduction::Mean ? per_sample.mean() : per_sample.sum();
}

}  // namespace ddplab::train
