#include "ddplab/train/options.h"

#include <c10/util/Exception.h>

namespace ddplab::train {

data::DatasetOptions dataset_options(const config::DatasetSpec& dataset) {
  data::DatasetOptions o;
  o.name = dataset.name;
  o.root = dataset.root;
  o.train_limit = dataset.train_limit;
  o.test_limit = dataset.test_limit;
  o.validation = dataset.validation;
  return o;
}

models::ModelOptions model_options(const config::ModelSpec& model) {
  models::ModelOptions o;
  o.name = model.name;
  for (const config::LayerSpec& l : model.layers)
    o.layers.push_back({l.type, l.channels, l.kernel, l.stride, l.padding, l.features, l.p});
  o.torchscript = model.torchscript;
  o.dropout = model.dropout;
  o.hidden = model.hidden;
  o.sync_bn = model.sync_bn;
  return o;
}

distributed::BuiltinCommHook builtin_comm_hook(const config::ReplicasSpec& replicas) {
  if (replicas.compression == config::Compression::kPowerSgd) return distributed::BuiltinCommHook::kPowerSgd;
  switch (replicas.grad_dtype) {
    case config::WireDtype::kFp32:
      return distributed::BuiltinCommHook::kAllreduce;
    case config::WireDtype::kBf16:
      return distributed::BuiltinCommHook::kBf16Compress;
    case config::WireDtype::kFp16:
      return distributed::BuiltinCommHook::kFp16Compress;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown wire dtype");
}

distributed::GradReducerOptions grad_reducer_options(const config::ReplicasSpec& replicas) {
  distributed::GradReducerOptions o;
  o.bucket_mb = replicas.bucket_mb;
  o.reduce = replicas.reduce;
  o.comm_hook = builtin_comm_hook(replicas);
  if (o.comm_hook == distributed::BuiltinCommHook::kPowerSgd) {
    const config::PowerSgdSpec& p = replicas.powersgd;
    distributed::PowerSgdOptions& q = o.powersgd;
    q.rank = p.rank;
    q.start_iter = p.start_iter;
    q.min_compression_rate = p.min_compression_rate;
    q.error_feedback = p.error_feedback;
    q.warm_start = p.warm_start;
    q.orthogonalization_epsilon = p.orthogonalization_epsilon;
    q.seed = static_cast<uint32_t>(p.seed);
  }
  return o;
}

}  // namespace ddplab::train
