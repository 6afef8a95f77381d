// In-memory image classification datasets (the MNIST family in IDX format).
//
// load_dataset() finds the four files under spec.root, each as raw or ".gz":
//   train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte
// and checks that image and label counts match and labels are < num_classes. A missing root or
// file is a ddplab::Error naming the path and pointing to docs/data.md.
// Images stay uint8 in memory (60000x28x28 = 47 MB); batches are normalized on the fly with
// the training set's mean/std.
#pragma once
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "ddplab/spec/spec.h"

namespace ddplab::data {

struct Dataset {
  at::Tensor images;  // uint8 [N, C, H, W], contiguous
  at::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.size(0); }
};

struct DatasetPair {
  std::string name;
  Dataset train;
  Dataset test;
  int64_t num_classes = 10;
  double mean = 0.0;  // of the (limited) training images, on the 0..1 scale
  double std = 1.0;
};

// The default data directory for a dataset name ("" for idx: it has none).
std::string default_root(const std::string& name);

// Checks that root and the four files exist (cheap; used before a run directory is made).
void check_dataset_files(const spec::DatasetSpec& spec);

// Reads the files and applies train_limit / test_limit (the first N samples).
DatasetPair load_dataset(const spec::DatasetSpec& spec);

}  // namespace ddplab::data
