#include "ddplab/data/dataset.h"

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/datasets.h"
#include "ddplab/data/cifar.h"
#include "ddplab/data/idx.h"
#include "ddplab/data/validation.h"

namespace ddplab::data {
namespace {

namespace fs = std::filesystem;

using config::DatasetName;
using config::DatasetReader;

bool is_cifar(DatasetName name) { return config::dataset_info(name).reader != DatasetReader::kIdx; }

CifarKind cifar_kind(DatasetName name) {
  return config::dataset_info(name).reader == DatasetReader::kCifar10 ? CifarKind::kCifar10 : CifarKind::kCifar100;
}

// The catalogue's file names of a split (config/datasets.h); IDX: images, then labels.
const config::DatasetFiles& split_files(DatasetName name, bool train) {
  const config::DatasetInfo& info = config::dataset_info(name);
  return train ? info.train : info.test;
}

// "dataset 'cifar10'", the prefix of this file's messages.
std::string dataset_label(const DatasetOptions& spec) { return fmt::format("dataset '{}'", config::name(spec.name)); }

// The official file names, train files in the order they are concatenated.
std::vector<std::string> cifar_files(const DatasetOptions& spec, bool train) {
  const config::DatasetFiles& files = split_files(spec.name, train);
  std::vector<std::string> names;
  for (size_t i = 0; i < files.count; ++i) names.push_back((fs::path(spec.root) / files.names[i]).string());
  return names;
}

// The first `limit` samples (0: all); a view, so the full set is freed once it is dropped.
Dataset first(Dataset set, int64_t limit) {
  if (limit <= 0 || limit >= set.size()) return set;
  return {set.images.slice(0, 0, limit).contiguous(), set.labels.slice(0, 0, limit).contiguous()};
}

// Exact moments from byte histograms, one per channel: no [N, C, H, W] double tensor needed.
// The overall moments sum the channel histograms in value order, as a single histogram would.
void set_statistics(DatasetPair& pair) {
  const at::Tensor& images = pair.train.images;
  const int64_t n = images.size(0), channels = images.size(1), plane = images.size(2) * images.size(3);
  std::vector<std::array<int64_t, 256>> hist(static_cast<size_t>(channels));
  for (auto& h : hist) h.fill(0);
  const uint8_t* p = images.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c, p += plane)
      for (int64_t k = 0; k < plane; ++k) ++hist[static_cast<size_t>(c)][p[k]];
  auto moments = [](const std::array<int64_t, 256>& h, double* mean, double* std) {
    double sum = 0, sum_sq = 0, count = 0;
    for (int v = 0; v < 256; ++v) {
      double x = v / 255.0;
      sum += x * static_cast<double>(h[v]);
      sum_sq += x * x * static_cast<double>(h[v]);
      count += static_cast<double>(h[v]);
    }
    *mean = sum / count;
    double var = sum_sq / count - *mean * *mean;
    *std = var > 0 ? std::sqrt(var) : 1.0;  // constant images: avoid dividing by 0
  };
  std::array<int64_t, 256> all{};
  pair.channel_mean.assign(static_cast<size_t>(channels), 0.0);
  pair.channel_std.assign(static_cast<size_t>(channels), 1.0);
  for (size_t c = 0; c < hist.size(); ++c) {
    for (int v = 0; v < 256; ++v) all[v] += hist[c][v];
    moments(hist[c], &pair.channel_mean[c], &pair.channel_std[c]);
  }
  moments(all, &pair.mean, &pair.std);
}

void check_root(const DatasetOptions& spec) {
  std::error_code ec;
  if (spec.root.empty()) {
    throw Error(dataset_label(spec) + ": no dataset.root given; see docs/data.md");
  }
  if (!fs::is_directory(spec.root, ec)) {
    std::string hint;
    const config::DatasetInfo& info = config::dataset_info(spec.name);
    if (info.fetchable) {
      const std::string archive =
          *info.archive != '\0' ? fmt::format(", or unpack the official {} there", info.archive) : "";
      hint = fmt::format(
          " (scripts/fetch-data.py {} downloads it where the default dataset.root looks{}, or set "
          "dataset.root)",
          config::name(spec.name), archive);
    }
    const bool other = fs::exists(spec.root, ec);
    const std::string relative =
        fs::path(spec.root).is_relative()
            ? fmt::format(", relative to the working directory {}", fs::current_path(ec).string())
            : "";
    throw Error(
        dataset_label(spec) + ": data directory " + spec.root + relative +
        (other ? " is not a directory (dataset.root names the directory that holds the files)" : " does not exist") +
        hint + "; see docs/data.md");
  }
}

// The raw file if present, else the ".gz" one (config::dataset_file_read).
std::string find_file(const DatasetOptions& spec, const std::string& base) {
  fs::path raw = fs::path(spec.root) / base;
  fs::path gz = fs::path(spec.root) / (base + ".gz");
  std::error_code ec;
  const fs::path read = config::dataset_file_read(DatasetReader::kIdx, spec.root, base);
  if (fs::is_regular_file(read, ec)) return read.string();
  for (const auto& path : {raw, gz})
    if (fs::exists(path, ec))
      throw Error(dataset_label(spec) + ": " + path.string() + " is not a regular file; see docs/data.md");
  throw Error(dataset_label(spec) + ": missing file " + raw.string() + " (or " + gz.string() + "); see docs/data.md");
}

Dataset load_split(const DatasetOptions& spec, const char* images_name, const char* labels_name, int64_t limit,
                   int64_t num_classes) {
  std::string images_path = find_file(spec, images_name);
  std::string labels_path = find_file(spec, labels_name);
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) {
    throw Error(fmt::format("{}: expected 3 dimensions [N, H, W], found {}", images_path, images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw Error(fmt::format("{}: expected 1 dimension [N], found {}", labels_path, labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw Error(
        fmt::format("{} has {} images but {} has {} labels", images_path, images.dims[0], labels_path, labels.dims[0]));
  }
  for (size_t i = 0; i < labels.bytes.size(); ++i) {
    if (labels.bytes[i] >= num_classes) {
      throw Error(fmt::format("{}: label {} at index {} is not < {}", labels_path, labels.bytes[i], i, num_classes));
    }
  }
  int64_t n = images.dims[0];
  if (limit > 0 && limit < n) n = limit;
  int64_t h = images.dims[1], w = images.dims[2];
  Dataset set;
  set.images = torch::empty({n, 1, h, w}, torch::kUInt8);
  std::memcpy(set.images.data_ptr<uint8_t>(), images.bytes.data(), static_cast<size_t>(n * h * w));
  set.labels = torch::empty({n}, torch::kLong);
  auto* lab = set.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) lab[i] = labels.bytes[static_cast<size_t>(i)];
  return set;
}

}  // namespace

void check_dataset_files(const DatasetOptions& spec) {
  check_root(spec);
  if (is_cifar(spec.name)) {
    for (bool train : {true, false})
      for (const auto& path : cifar_files(spec, train)) {
        try {
          check_cifar_file(path, cifar_kind(spec.name));
        } catch (const Error& e) {
          throw Error(dataset_label(spec) + ": " + e.what());
        }
      }
    return;
  }
  for (bool train : {true, false}) {
    const config::DatasetFiles& files = split_files(spec.name, train);
    for (size_t i = 0; i < files.count; ++i) find_file(spec, files.names[i]);
  }
}

DatasetPair load_dataset(const DatasetOptions& spec) {
  check_dataset_files(spec);
  DatasetPair pair;
  pair.name = config::name(spec.name);
  if (is_cifar(spec.name)) {
    const CifarKind kind = cifar_kind(spec.name);
    pair.num_classes = cifar_classes(kind);
    pair.train = first(read_cifar(cifar_files(spec, true), kind), spec.train_limit);
    pair.test = first(read_cifar(cifar_files(spec, false), kind), spec.test_limit);
  } else {
    const config::DatasetFiles &train = split_files(spec.name, true), &test = split_files(spec.name, false);
    pair.num_classes = config::dataset_info(spec.name).classes;
    pair.train = load_split(spec, train.names[0], train.names[1], spec.train_limit, pair.num_classes);
    pair.test = load_split(spec, test.names[0], test.names[1], spec.test_limit, pair.num_classes);
  }
  if (pair.train.images.size(1) != pair.test.images.size(1) || pair.train.images.size(2) != pair.test.images.size(2) ||
      pair.train.images.size(3) != pair.test.images.size(3)) {
    throw Error(dataset_label(spec) + " in " + spec.root + ": train and test images differ in size");
  }
  if (const int64_t held = validation_count(spec.validation, pair.train.size()); held > 0)
    std::tie(pair.train, pair.validation) = split_validation(pair.train, held, pair.num_classes);
  set_statistics(pair);
  return pair;
}

}  // namespace ddplab::data
