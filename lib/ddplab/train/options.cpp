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
  o.compress_bf16 = replicas.grad_dtype == config::WireDtype::kBf16;
  return o;
}

}  // namespace ddplab::train
