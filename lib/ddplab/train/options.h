// The one place where the typed spec (config/spec.h) becomes the options structs of the layers
// below train: data (DatasetOptions), models (ModelOptions) and distributed (GradReducerOptions).
// Those layers never see config::ExperimentSpec or its sections; runner, the tests and the
// benchmarks call these too when they load a dataset or build a model from a spec.
#pragma once
#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/models/models.h"

namespace ddplab::train {

// dataset.{name, root, train_limit, test_limit, validation}; dataset.augment goes to data::make_transform.
data::DatasetOptions dataset_options(const config::DatasetSpec& dataset);

// model.{name, layers, torchscript, dropout, hidden, sync_bn}.
models::ModelOptions model_options(const config::ModelSpec& model);

// replicas.{bucket_mb, reduce, grad_dtype, compression, powersgd}; the other fields keep
// GradReducerOptions' defaults.
distributed::GradReducerOptions grad_reducer_options(const config::ReplicasSpec& replicas);

}  // namespace ddplab::train
