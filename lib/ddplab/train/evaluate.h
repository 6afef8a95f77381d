// Exact evaluation of the model a process holds on its replicas' slices (data::eval_shard) of
// the test set and the validation split; the trainer all-reduces the sums into the whole sets'.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/data/dataset.h"
#include "ddplab/data/device_data.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/network.h"

namespace ddplab::train {

struct SetSums {
  at::Tensor loss_sum;  // float64, 0-dim, on the device: summed loss of the slices' samples
  at::Tensor correct;   // int64, 0-dim, on the device
};

struct Evaluation {
  SetSums test;
  std::optional<SetSums> validation;  // dataset.validation
  std::optional<double> drift;        // local SGD / EASGD: the replicas' drift (ReplicaSync::EpochView)
};

// A split to evaluate, and its copy on the device when batches are made there (else null).
struct EvalSplit {
  const data::Dataset& host;
  const data::DeviceDataset* on_device = nullptr;
};

// Samples [begin, end) of `split` as the model takes them (the evaluation's transform: no
// augmentation), on the model's device.
data::Batch eval_batch(const Network& net, const EvalSplit& split, int64_t begin, int64_t end);

// In eval mode and without autograd (under bf16 autocast when `bf16`): the first `test_samples` of
// data.test and all of data.validation (if any), the slices of replicas `ids` of `count`, in
// batches of 1000 (made from `on_device`'s copies when not null), loss as `faults` says. The caller
// puts the BatchNorm statistics in place first.
Evaluation evaluate_sets(Network& net, const data::DatasetPair& data, const data::DeviceData* on_device,
                         int64_t test_samples, const std::vector<int>& ids, int count, const DebugFaults& faults,
                         bool bf16);

// As evaluate_sets, for the first `samples` of `set` alone.
SetSums evaluate_first(Network& net, const EvalSplit& split, int64_t samples, const std::vector<int>& ids, int count,
                       const DebugFaults& faults, bool bf16);

}  // namespace ddplab::train
