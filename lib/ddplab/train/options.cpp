#include "ddplab/train/options.h"

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

distributed::GradReducerOptions grad_reducer_options(const config::ReplicasSpec& replicas) {
  distributed::GradReducerOptions o;
  o.bucket_mb = replicas.bucket_mb;
  o.mean = replicas.reduce == config::Reduce::kMean;
  o.grad_dtype = replicas.grad_dtype;
  if (replicas.compression == config::Compression::kPowerSgd) {
    const config::PowerSgdSpec& p = replicas.powersgd;
    distributed::PowerSgdOptions& q = o.powersgd.emplace();
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
