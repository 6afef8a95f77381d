// The CIFAR models of the registry (models.h).
//
// cifar_tf_cnn: the TF CIFAR-10 tutorial model (tensorflow/models tutorials/image/cifar10,
//   cifar10.py inference()): conv5x5 64 'same' -> ReLU -> maxpool 3x3 stride 2 padding 1 -> LRN ->
//   conv5x5 64 'same' -> ReLU -> LRN -> maxpool 3x3 s2 p1 -> fc 384 -> ReLU -> fc 192 -> ReLU ->
//   fc classes. The fully connected layers are named fc1, fc2, fc3 (TF's local3, local4,
//   softmax_linear). At 24x24 (dataset.augment tf_tutorial) the pools give 12x12 then 6x6 and the
//   model has 1,068,298 parameters; other sizes work (fc1 follows the pooled size). Initialized as
//   the tutorial: weights from normals truncated at 2 std (conv 5e-2, fc1/fc2 0.04, fc3 1/192),
//   biases 0 (conv1, fc3) or 0.1 (conv2, fc1, fc2). TF's 'SAME' pooling pads only the bottom/right
//   edge; padding 1 on every side gives the same output size with windows shifted by one pixel.
//
// resnet20: He et al. 2016 ("Deep Residual Learning", section 4.2), n = 3: conv3x3 16 -> BN ->
//   ReLU, three stages of three basic blocks (16, 32, 64 channels; stages 2 and 3 start with
//   stride 2), global average pool, fc classes. Basic block: conv3x3 -> BN -> ReLU -> conv3x3 -> BN,
//   plus the shortcut, -> ReLU. Shortcuts are option A: identity, and where the shape changes the
//   input subsampled with stride 2 and zero-padded in channels (no parameters), so the model has
//   269,722 parameters (option B's 1x1 projections would make it 272,474). Convolutions have no
//   bias and He (Kaiming) normal initialization; BatchNorm layers synchronize over replicas when
//   `sync_bn` (batch_norm.h), through the model's ReplicaSum.
#pragma once
#include <memory>

#include <ATen/core/Tensor.h>

#include "ddplab/models/models.h"

namespace ddplab::models {

std::shared_ptr<Model> make_cifar_tf_cnn(const InputShape& shape);
std::shared_ptr<Model> make_resnet20(const InputShape& shape, bool sync_bn);

// TF's local response normalization as the tutorial calls it, tf.nn.lrn(x, depth_radius=4,
// bias=1, alpha=0.001/9, beta=0.75): x_c / (1 + 0.001/9 * sum_{|c'-c|<=4} x_c'^2)^0.75 over the
// channels of [B, C, H, W]. (torch's LocalResponseNorm divides alpha by its window size 9, so it
// is called with alpha 0.001.)
at::Tensor tf_local_response_norm(const at::Tensor& x);

}  // namespace ddplab::models
