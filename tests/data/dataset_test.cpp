#include "ddplab/data/dataset.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/data/idx.h"
#include "test_util.h"

namespace ddplab::data {
namespace {

using ddplab::testing::error_of;
using ddplab::testing::TempDir;
using ddplab::testing::write_tiny_mnist;

DatasetOptions idx_spec(const std::string& root) {
  DatasetOptions s;
  s.name = config::DatasetName::kIdx;
  s.root = root;
  return s;
}

TEST(Dataset, DefaultRoots) {
  EXPECT_EQ(config::default_root(config::DatasetName::kFashionMnist), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(config::default_root(config::DatasetName::kMnist), "data/mnist");
  EXPECT_EQ(config::default_root(config::DatasetName::kIdx), "");
}

TEST(Dataset, LoadsTinyMnistGzAndRaw) {
  for (bool gz : {true, false}) {
    TempDir dir;
    write_tiny_mnist(dir.path(), 50, 20, gz);
    check_dataset_files(idx_spec(dir.str()));
    DatasetPair d = load_dataset(idx_spec(dir.str()));
    EXPECT_EQ(d.num_classes, 10);
    EXPECT_EQ(d.train.size(), 50);
    EXPECT_EQ(d.test.size(), 20);
    EXPECT_EQ(d.train.images.sizes(), (std::vector<int64_t>{50, 1, 28, 28}));
    EXPECT_EQ(d.train.images.scalar_type(), torch::kUInt8);
    EXPECT_TRUE(d.train.images.is_contiguous());
    EXPECT_EQ(d.train.labels.scalar_type(), torch::kLong);
    EXPECT_LT(d.train.labels.max().item<int64_t>(), 10);
    // mean/std match a direct double computation over the training images.
    auto x = d.train.images.to(torch::kDouble) / 255.0;
    EXPECT_NEAR(d.mean, x.mean().item<double>(), 1e-12);
    EXPECT_NEAR(d.std, x.std(/*unbiased=*/false).item<double>(), 1e-9);
    // The band of class c is bright: the file content reached the tensor in row-major order.
    int64_t c = d.train.labels[0].item<int64_t>();
    EXPECT_GE(d.train.images[0][0][2 + 2 * c][5].item<int>(), 180);
  }
}

// Limits keep the first samples, for every file format; statistics are of the limited set.
class DatasetLimits : public ::testing::TestWithParam<std::string> {};

TEST_P(DatasetLimits, KeepTheFirstSamples) {
  TempDir dir;
  const std::string name = GetParam();
  if (name == "idx") {
    write_tiny_mnist(dir.path(), 40, 30, false);
  } else {
    ddplab::testing::write_tiny_cifar(dir.path(), 40, 30, name == "cifar100");
  }
  auto spec = idx_spec(dir.str());
  spec.name = config::parse_setting<config::DatasetName>(name, "/dataset/name");
  DatasetPair full = load_dataset(spec);
  EXPECT_EQ(full.num_classes, name == "cifar100" ? 100 : 10);
  spec.train_limit = 12;
  spec.test_limit = 7;
  DatasetPair d = load_dataset(spec);
  EXPECT_EQ(d.train.size(), 12);
  EXPECT_EQ(d.test.size(), 7);
  EXPECT_TRUE(torch::equal(d.train.images, full.train.images.slice(0, 0, 12)));
  EXPECT_TRUE(torch::equal(d.test.labels, full.test.labels.slice(0, 0, 7)));
  auto x = d.train.images.to(torch::kDouble) / 255.0;
  EXPECT_NEAR(d.mean, x.mean().item<double>(), 1e-12);  // over the limited set only
  spec.train_limit = 1000;                              // a limit above N keeps all
  EXPECT_EQ(load_dataset(spec).train.size(), 40);
}

INSTANTIATE_TEST_SUITE_P(Dataset, DatasetLimits, ::testing::Values("idx", "cifar10", "cifar100"));

TEST(Dataset, PrefersRawOverGz) {
  TempDir dir;
  write_tiny_mnist(dir.path(), 10, 5, true);
  write_tiny_mnist(dir.path(), 11, 5, false);
  EXPECT_EQ(load_dataset(idx_spec(dir.str())).train.size(), 11);
}

TEST(Dataset, CountMismatchNamesBothFiles) {
  TempDir dir;
  write_tiny_mnist(dir.path(), 10, 5, false);
  std::string labels = dir.str("train-labels-idx1-ubyte");
  write_idx(labels, {9}, std::vector<uint8_t>(9, 1), false);
  std::string msg = error_of([&] { load_dataset(idx_spec(dir.str())); });
  EXPECT_NE(msg.find(dir.str("train-images-idx3-ubyte")), std::string::npos) << msg;
  EXPECT_NE(msg.find(labels), std::string::npos) << msg;
}

TEST(Dataset, BadLabelsAndShapes) {
  TempDir dir;
  write_tiny_mnist(dir.path(), 10, 5, false);
  std::string labels = dir.str("t10k-labels-idx1-ubyte");
  write_idx(labels, {5}, {1, 2, 10, 3, 4}, false);
  std::string msg = error_of([&] { load_dataset(idx_spec(dir.str())); });
  EXPECT_NE(msg.find(labels), std::string::npos) << msg;
  EXPECT_NE(msg.find("label 10"), std::string::npos) << msg;

  write_idx(labels, {5, 1}, {1, 2, 3, 3, 4}, false);
  msg = error_of([&] { load_dataset(idx_spec(dir.str())); });
  EXPECT_NE(msg.find("1 dimension"), std::string::npos) << msg;

  std::string images = dir.str("train-images-idx3-ubyte");
  write_idx(images, {10, 784}, std::vector<uint8_t>(7840), false);
  msg = error_of([&] { load_dataset(idx_spec(dir.str())); });
  EXPECT_NE(msg.find(images), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 dimensions"), std::string::npos) << msg;
}

TEST(Dataset, MissingDirectoryOrFile) {
  TempDir dir;
  std::string root = dir.str("absent");
  std::string msg = error_of([&] { check_dataset_files(idx_spec(root)); });
  EXPECT_NE(msg.find(root), std::string::npos) << msg;
  EXPECT_NE(msg.find("see docs/data.md"), std::string::npos) << msg;
  msg = error_of([&] { load_dataset(idx_spec(root)); });
  EXPECT_NE(msg.find("see docs/data.md"), std::string::npos) << msg;

  write_tiny_mnist(dir.path(), 10, 5, true);
  std::filesystem::remove(dir.path() / "t10k-images-idx3-ubyte.gz");
  msg = error_of([&] { check_dataset_files(idx_spec(dir.str())); });
  EXPECT_NE(msg.find(dir.str("t10k-images-idx3-ubyte")), std::string::npos) << msg;
  EXPECT_NE(msg.find("see docs/data.md"), std::string::npos) << msg;
}

// What is there but of the wrong kind is named as such, not as missing.
TEST(Dataset, RootThatIsAFileOrDataFileThatIsADirectory) {
  TempDir dir;
  write_tiny_mnist(dir.path(), 10, 5, true);
  const std::string file_root = dir.str("train-labels-idx1-ubyte.gz");
  std::string msg = error_of([&] { check_dataset_files(idx_spec(file_root)); });
  EXPECT_NE(msg.find(file_root + " is not a directory"), std::string::npos) << msg;
  std::filesystem::remove(dir.path() / "t10k-images-idx3-ubyte.gz");
  std::filesystem::create_directory(dir.path() / "t10k-images-idx3-ubyte");
  msg = error_of([&] { check_dataset_files(idx_spec(dir.str())); });
  EXPECT_NE(msg.find(dir.str("t10k-images-idx3-ubyte") + " is not a regular file"), std::string::npos) << msg;
}

TEST(Dataset, RealFashionMnist) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(root + "/train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(root + "/train-images-idx3-ubyte")) {
    GTEST_SKIP() << root << " absent (apt install dataset-fashion-mnist)";
  }
  DatasetOptions s;
  s.name = config::DatasetName::kFashionMnist;
  s.root = root;
  DatasetPair d = load_dataset(s);
  EXPECT_EQ(d.train.size(), 60000);
  EXPECT_EQ(d.test.size(), 10000);
  EXPECT_EQ(d.train.images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_NEAR(d.mean, 0.2860, 0.001);
  EXPECT_NEAR(d.std, 0.3530, 0.001);
  // Balanced classes: 6000 of each in training.
  auto counts = torch::bincount(d.train.labels);
  EXPECT_TRUE(torch::all(counts == 6000).item<bool>());
}

}  // namespace
}  // namespace ddplab::data
