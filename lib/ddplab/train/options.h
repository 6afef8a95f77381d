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

// The comm hook replicas.grad_dtype and replicas.compression choose, the one place they become
// one: compression "powersgd" is kPowerSgd (config::resolve allows it with grad_dtype "fp32" only);
// else grad_dtype fp32 is kAllreduce, bf16 kBf16Compress, fp16 kFp16Compress. Processes
// (GradReducerOptions) and simulated replicas (simulated.h) both take it from here.
distributed::BuiltinCommHook builtin_comm_hook(const config::ReplicasSpec& replicas);

// replicas.{bucket_mb, reduce, grad_dtype, compression, powersgd}; the other fields keep
// GradReducerOptions' defaults.
distributed::GradReducerOptions grad_reducer_options(const config::ReplicasSpec& replicas);

}  // namespace ddplab::train
