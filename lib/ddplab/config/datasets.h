// The dataset catalogue: every dataset ddplab reads, one row each. config reads it for
// dataset.root's default and the known class and test-set counts (spec.h), data for the file
// names and the reader (data/dataset.cpp), runner for a packed sweep's work estimate
// (runner/scheduler.cpp). Readers stay in data/ (idx.h, cifar.h).
//
// Adding a dataset in a format ddplab reads: its enumerator and spelling in settings.h
// (DatasetName), its row here, its spelling in schema.json's dataset.name enum (docs/architecture.md,
// "A new dataset").
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "ddplab/config/settings.h"

namespace ddplab::config {

// How data/ reads a dataset's files: IDX (data/idx.h; train and test are each [images, labels])
// or CIFAR binary (data/cifar.h; the files of a split are concatenated in order).
enum class DatasetReader { kIdx, kCifar10, kCifar100 };

// The file names of one split, relative to dataset.root; `count` of them.
struct DatasetFiles {
  std::array<const char*, 5> names{};
  size_t count = 0;
};

struct DatasetInfo {
  DatasetName id;            // its enumerator (name(id): the spec's dataset.name), in enumerator order
  const char* default_root;  // dataset.root when the spec leaves it ""; "" when there is none
  DatasetReader reader;
  DatasetFiles train, test;
  int64_t classes;      // labels are < classes
  int64_t train_size;   // the full training set (idx: a guess, for the work estimate)
  int64_t test_size;    // the full test set
  bool official;        // the official files: classes and test_size are known (idx: any IDX files)
  bool fetchable;       // scripts/fetch-data.py <name> downloads it to default_root
  const char* archive;  // the official archive a user may unpack into dataset.root instead; "" when none
};

inline constexpr DatasetFiles kIdxTrain{{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}, 2};
inline constexpr DatasetFiles kIdxTest{{"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}, 2};

inline constexpr std::array kDatasets{
    DatasetInfo{DatasetName::kFashionMnist, "/usr/share/datasets/fashion-mnist", DatasetReader::kIdx, kIdxTrain,
                kIdxTest, 10, 60000, 10000, true, false, ""},
    DatasetInfo{DatasetName::kMnist, "data/mnist", DatasetReader::kIdx, kIdxTrain, kIdxTest, 10, 60000, 10000, true,
                true, ""},
    DatasetInfo{DatasetName::kIdx, "", DatasetReader::kIdx, kIdxTrain, kIdxTest, 10, 60000, 10000, false, false, ""},
    DatasetInfo{
        DatasetName::kCifar10, "data/cifar-10-batches-bin", DatasetReader::kCifar10,
        DatasetFiles{
            {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}, 5},
        DatasetFiles{{"test_batch.bin"}, 1}, 10, 50000, 10000, true, true, "cifar-10-binary.tar.gz"},
    DatasetInfo{DatasetName::kCifar100, "data/cifar-100-binary", DatasetReader::kCifar100,
                DatasetFiles{{"train.bin"}, 1}, DatasetFiles{{"test.bin"}, 1}, 100, 50000, 10000, true, true,
                "cifar-100-binary.tar.gz"},
};

constexpr bool rows_in_enumerator_order() {
  for (size_t i = 0; i < kDatasets.size(); ++i)
    if (static_cast<size_t>(kDatasets[i].id) != i) return false;
  return true;
}
static_assert(rows_in_enumerator_order() && kDatasets.size() == SettingNames<DatasetName>::names.size(),
              "kDatasets: one row per DatasetName, in enumerator order");

constexpr const DatasetInfo& dataset_info(DatasetName name) { return kDatasets[static_cast<size_t>(name)]; }

// The path data/ reads for the catalogue's file `base` under `root`: for IDX the raw file when it is
// a regular file, else "<base>.gz" (raw wins, so a user can unpack in place); CIFAR's as named.
inline std::filesystem::path dataset_file_read(DatasetReader reader, const std::filesystem::path& root,
                                               const std::string& base) {
  std::error_code ec;
  if (reader != DatasetReader::kIdx || std::filesystem::is_regular_file(root / base, ec)) return root / base;
  return root / (base + ".gz");
}

// Every path data/ reads for dataset `name` under `root` (dataset_file_read), train then test.
inline std::vector<std::filesystem::path> dataset_files_read(DatasetName name, const std::filesystem::path& root) {
  const DatasetInfo& info = dataset_info(name);
  std::vector<std::filesystem::path> paths;
  for (const DatasetFiles* split : {&info.train, &info.test})
    for (size_t i = 0; i < split->count; ++i) paths.push_back(dataset_file_read(info.reader, root, split->names[i]));
  return paths;
}

}  // namespace ddplab::config
