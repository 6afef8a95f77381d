// In-memory image classification datasets: the MNIST family in IDX format and CIFAR-10/100 in
// their binary format.
//
// load_dataset() reads the files that the dataset catalogue (config/datasets.h) names for
// options.name, under options.root, with the catalogue's reader:
//   IDX (fashion-mnist, mnist, idx)  images and labels per split, each raw or ".gz"; checks that
//     image and label counts match and labels are < the catalogue's classes;
//   CIFAR binary (cifar10, cifar100)  a split's files concatenated in order; see cifar.h for the
//     record layout and its checks.
// A missing root or file is a ddplab::Error naming the path and pointing to docs/data.md.
// Images stay uint8 in memory (60000x28x28 = 47 MB, 50000x3x32x32 = 154 MB); batches are
// normalized on the fly (transform.h) with the training set's statistics.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/settings.h"

namespace ddplab::data {

// Which dataset to read and how much of it; the trainer fills it from the spec's `dataset`
// section (train/options.h). Defaults as the spec's.
struct DatasetOptions {
  config::DatasetName name = config::DatasetName::kFashionMnist;
  std::string root;         // the folder with the dataset's files
  int64_t train_limit = 0;  // the first N training samples; 0: all
  int64_t test_limit = 0;   // likewise for the test set
  double validation = 0;    // held out of the (limited) training set, validation.h; 0: none
};

struct Dataset {
  at::Tensor images;  // uint8 [N, C, H, W], contiguous
  at::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

struct DatasetPair {
  std::string name;
  Dataset train;  // without the validation split's samples
  Dataset test;
  Dataset validation;  // options.validation's held-out part of the training set; empty without
  int64_t num_classes = 10;
  // Of the (limited) training images on the 0..1 scale, population std: over all pixels, and
  // per channel (C entries). A constant set gets std 1 (never divides by 0).
  double mean = 0.0;
  double std = 1.0;
  std::vector<double> channel_mean{0.0};
  std::vector<double> channel_std{1.0};
};

// Checks that root and the dataset's files exist, and for CIFAR that their sizes are whole
// records (cheap, reads nothing; used before a run directory is made).
void check_dataset_files(const DatasetOptions& options);

// Reads the files, applies options.train_limit / test_limit (the first N samples), then holds out
// options.validation of the training set (validation.h); the statistics are the rest's.
DatasetPair load_dataset(const DatasetOptions& options);

}  // namespace ddplab::data
