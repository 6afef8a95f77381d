// cifar_tf_cnn's local response normalization (cifar_tf_cnn.cpp), declared for its test.
#pragma once
#include <ATen/core/Tensor.h>

namespace ddplab::models {

// TF's local response normalization as the tutorial calls it, tf.nn.lrn(x, depth_radius=4,
// bias=1, alpha=0.001/9, beta=0.75): x_c / (1 + 0.001/9 * sum_{|c'-c|<=4} x_c'^2)^0.75 over the
// channels of [B, C, H, W]. (torch's LocalResponseNorm divides alpha by its window size 9, so it
// is called with alpha 0.001.)
at::Tensor tf_local_response_norm(const at::Tensor& x);

}  // namespace ddplab::models
