#include "ddplab/data/dataset.h"

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "ddplab/data/idx.h"
#include "ddplab/error.h"

namespace ddplab::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTrainImages = "train-images-idx3-ubyte";
constexpr const char* kTrainLabels = "train-labels-idx1-ubyte";
constexpr const char* kTestImages = "t10k-images-idx3-ubyte";
constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte";

void check_root(const spec::DatasetSpec& spec) {
  std::error_code ec;
  if (spec.root.empty()) {
    throw Error("dataset '" + spec.name + "': no dataset.root given; see docs/data.md");
  }
  if (!fs::is_directory(spec.root, ec)) {
    throw Error("dataset '" + spec.name + "': data directory " + spec.root +
                " does not exist; see docs/data.md");
  }
}

// The raw file if present, else the ".gz" one; raw wins so a user can unpack in place.
std::string find_file(const spec::DatasetSpec& spec, const std::string& base) {
  fs::path raw = fs::path(spec.root) / base;
  fs::path gz = fs::path(spec.root) / (base + ".gz");
  std::error_code ec;
  if (fs::is_regular_file(raw, ec)) return raw.string();
  if (fs::is_regular_file(gz, ec)) return gz.string();
  throw Error("dataset '" + spec.name + "': missing file " + raw.string() + " (or " +
              gz.string() + "); see docs/data.md");
}

Dataset load_split(const spec::DatasetSpec& spec, const char* images_name,
                   const char* labels_name, int64_t limit, int64_t num_classes) {
  std::string images_path = find_file(spec, images_name);
  std::string labels_path = find_file(spec, labels_name);
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) {
    throw Error(images_path + ": expected 3 dimensions [N, H, W], found " +
                std::to_string(images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw Error(labels_path + ": expected 1 dimension [N], found " +
                std::to_string(labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw Error(images_path + " has " + std::to_string(images.dims[0]) + " images but " +
                labels_path + " has " + std::to_string(labels.dims[0]) + " labels");
  }
  for (size_t i = 0; i < labels.bytes.size(); ++i) {
    if (labels.bytes[i] >= num_classes) {
      throw Error(labels_path + ": label " + std::to_string(labels.bytes[i]) + " at index " +
                  std::to_string(i) + " is not < " + std::to_string(num_classes));
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

std::string default_root(const std::string& name) {
  if (name == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (name == "mnist") return "data/mnist";
  return "";
}

void check_dataset_files(const spec::DatasetSpec& spec) {
  check_root(spec);
  for (const char* base : {kTrainImages, kTrainLabels, kTestImages, kTestLabels}) find_file(spec, base);
}

DatasetPair load_dataset(const spec::DatasetSpec& spec) {
  check_dataset_files(spec);
  DatasetPair pair;
  pair.name = spec.name;
  pair.num_classes = 10;
  pair.train = load_split(spec, kTrainImages, kTrainLabels, spec.train_limit, pair.num_classes);
  pair.test = load_split(spec, kTestImages, kTestLabels, spec.test_limit, pair.num_classes);
  if (pair.train.images.size(1) != pair.test.images.size(1) ||
      pair.train.images.size(2) != pair.test.images.size(2) ||
      pair.train.images.size(3) != pair.test.images.size(3)) {
    throw Error("dataset '" + spec.name + "' in " + spec.root +
                ": train and test images differ in size");
  }
  // Exact moments from a byte histogram: no 47M-element double tensor needed.
  std::array<int64_t, 256> hist{};
  const uint8_t* p = pair.train.images.data_ptr<uint8_t>();
  int64_t count = pair.train.images.numel();
  for (int64_t i = 0; i < count; ++i) ++hist[p[i]];
  double sum = 0, sum_sq = 0;
  for (int v = 0; v < 256; ++v) {
    double x = v / 255.0;
    sum += x * static_cast<double>(hist[v]);
    sum_sq += x * x * static_cast<double>(hist[v]);
  }
  pair.mean = sum / static_cast<double>(count);
  double var = sum_sq / static_cast<double>(count) - pair.mean * pair.mean;
  pair.std = var > 0 ? std::sqrt(var) : 1.0;  // constant images: avoid dividing by 0
  return pair;
}

}  // namespace ddplab::data
