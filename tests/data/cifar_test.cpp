#include "ddplab/data/cifar.h"

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "test_util.h"

namespace ddplab::data {
namespace {

namespace fs = std::filesystem;
using ddplab::testing::error_of;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;
using ddplab::testing::write_tiny_cifar;

DatasetOptions cifar_spec(const std::string& name, const std::string& root) {
  DatasetOptions s;
  s.name = config::parse_setting<config::DatasetName>(name, "/dataset/name");
  s.root = root;
  return s;
}

// Image i of a file: pixel (c, y, x) = (i + 7c + 3y + x) mod 256; a plane per channel differs.
std::vector<uint8_t> patterned_pixels(int n, int first = 0) {
  std::vector<uint8_t> p(static_cast<size_t>(n) * kCifarPixels);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          p[static_cast<size_t>(i) * kCifarPixels + (c * 32 + y) * 32 + x] =
              static_cast<uint8_t>((first + i + 7 * c + 3 * y + x) % 256);
  return p;
}

TEST(Cifar, RecordSizesAndClasses) {
  EXPECT_EQ(cifar_record_bytes(CifarKind::kCifar10), 3073);
  EXPECT_EQ(cifar_record_bytes(CifarKind::kCifar100), 3074);
  EXPECT_EQ(cifar_classes(CifarKind::kCifar10), 10);
  EXPECT_EQ(cifar_classes(CifarKind::kCifar100), 100);
}

TEST(Cifar, WriterProducesTheOfficialRecordLayout) {
  TempDir dir;
  auto pixels = patterned_pixels(2);
  write_cifar(dir.str("a.bin"), CifarKind::kCifar10, {3, 9}, pixels);
  std::string raw = read_file(dir.str("a.bin"));
  ASSERT_EQ(raw.size(), 2u * 3073);
  EXPECT_EQ(raw[0], 3);
  EXPECT_EQ(static_cast<uint8_t>(raw[1]), pixels[0]);            // red plane starts right after the label
  EXPECT_EQ(static_cast<uint8_t>(raw[1 + 1024]), pixels[1024]);  // then green
  EXPECT_EQ(raw[3073], 9);
  write_cifar(dir.str("b.bin"), CifarKind::kCifar100, {42, 99}, pixels, {8, 19});
  raw = read_file(dir.str("b.bin"));
  ASSERT_EQ(raw.size(), 2u * 3074);
  EXPECT_EQ(raw[0], 8);   // coarse first
  EXPECT_EQ(raw[1], 42);  // then fine
  EXPECT_EQ(raw[3074], 19);
  EXPECT_EQ(raw[3075], 99);
}

TEST(Cifar, DecodesLabelsAndPixelPlanesInFileOrder) {
  TempDir dir;
  write_cifar(dir.str("one.bin"), CifarKind::kCifar10, {1, 0, 7}, patterned_pixels(3, 0));
  write_cifar(dir.str("two.bin"), CifarKind::kCifar10, {9, 4}, patterned_pixels(2, 100));
  Dataset set = read_cifar({dir.str("one.bin"), dir.str("two.bin")}, CifarKind::kCifar10);
  ASSERT_EQ(set.size(), 5);
  EXPECT_EQ(set.images.sizes(), (std::vector<int64_t>{5, 3, 32, 32}));
  EXPECT_EQ(set.images.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(set.images.is_contiguous());
  EXPECT_EQ(set.labels.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(set.labels, torch::tensor({1, 0, 7, 9, 4}, torch::kLong)));
  // Sample 3 is the first record of the second file: (100 + 7c + 3y + x) mod 256.
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(set.images[3][c][5][6].item<int>(), (100 + 7 * c + 15 + 6) % 256) << "channel " << c;
    EXPECT_EQ(set.images[2][c][31][0].item<int>(), (2 + 7 * c + 93) % 256) << "channel " << c;
  }
}

TEST(Cifar, Cifar100UsesFineLabels) {
  TempDir dir;
  write_cifar(dir.str("train.bin"), CifarKind::kCifar100, {0, 57, 99}, patterned_pixels(3), {19, 0, 4});
  Dataset set = read_cifar({dir.str("train.bin")}, CifarKind::kCifar100);
  EXPECT_TRUE(torch::equal(set.labels, torch::tensor({0, 57, 99}, torch::kLong)));
  EXPECT_EQ(set.images[1][2][0][0].item<int>(), (1 + 14) % 256);
}

TEST(Cifar, TruncatedFileNamesFileAndSizes) {
  TempDir dir;
  const std::string path = dir.str("data_batch_1.bin");
  write_cifar(path, CifarKind::kCifar10, {1, 2}, patterned_pixels(2));
  write_file(path, read_file(path).substr(0, 3073 + 1000));
  for (auto fn : {+[](const std::string& p) { check_cifar_file(p, CifarKind::kCifar10); },
                  +[](const std::string& p) { read_cifar({p}, CifarKind::kCifar10); }}) {
    std::string msg = error_of([&] { fn(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("multiple of 3073 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("found 4073 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("docs/data.md"), std::string::npos) << msg;
  }
  write_file(path, "");
  EXPECT_NE(error_of([&] { check_cifar_file(path, CifarKind::kCifar10); }).find("found 0 bytes"), std::string::npos);
  // A CIFAR-10 file read as CIFAR-100 has the wrong record size too.
  write_cifar(path, CifarKind::kCifar10, {1, 2}, patterned_pixels(2));
  EXPECT_NE(error_of([&] { check_cifar_file(path, CifarKind::kCifar100); }).find("multiple of 3074"),
            std::string::npos);
}

TEST(Cifar, LabelOutOfRangeNamesFileAndRecord) {
  TempDir dir;
  const std::string path = dir.str("test_batch.bin");
  write_cifar(path, CifarKind::kCifar10, {1, 2, 10}, patterned_pixels(3));
  std::string msg = error_of([&] { read_cifar({path}, CifarKind::kCifar10); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("label 10 of record 2 is not < 10"), std::string::npos) << msg;

  write_cifar(path, CifarKind::kCifar100, {1, 100}, patterned_pixels(2), {0, 19});
  msg = error_of([&] { read_cifar({path}, CifarKind::kCifar100); });
  EXPECT_NE(msg.find("label 100 of record 1 is not < 100"), std::string::npos) << msg;
  write_cifar(path, CifarKind::kCifar100, {1, 2}, patterned_pixels(2), {3, 20});
  msg = error_of([&] { read_cifar({path}, CifarKind::kCifar100); });
  EXPECT_NE(msg.find("coarse label 20 of record 1"), std::string::npos) << msg;
}

TEST(Cifar, WriterRejectsSizeMismatch) {
  TempDir dir;
  EXPECT_THROW(write_cifar(dir.str("w.bin"), CifarKind::kCifar10, {1, 2}, patterned_pixels(1)), Error);
  EXPECT_THROW(write_cifar(dir.str("w.bin"), CifarKind::kCifar100, {1, 2}, patterned_pixels(2), {1}), Error);
}

TEST(CifarDataset, DefaultRootsAreTheTarballDirectories) {
  EXPECT_EQ(config::default_root(config::DatasetName::kCifar10), "data/cifar-10-batches-bin");
  EXPECT_EQ(config::default_root(config::DatasetName::kCifar100), "data/cifar-100-binary");
}

TEST(CifarDataset, LoadsTheFiveTrainingBatchesInOrderAndTheTestBatch) {
  TempDir dir;
  write_tiny_cifar(dir.path(), 23, 7);
  std::vector<at::Tensor> parts;
  for (int f = 1; f <= 5; ++f)
    parts.push_back(read_cifar({dir.str(fmt::format("data_batch_{}.bin", f))}, CifarKind::kCifar10).labels);
  check_dataset_files(cifar_spec("cifar10", dir.str()));
  DatasetPair d = load_dataset(cifar_spec("cifar10", dir.str()));
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.train.size(), 23);
  EXPECT_EQ(d.test.size(), 7);
  EXPECT_EQ(d.train.images.sizes(), (std::vector<int64_t>{23, 3, 32, 32}));
  EXPECT_TRUE(torch::equal(d.train.labels, torch::cat(parts)));
  // Statistics: overall and per channel, population std, on the 0..1 scale.
  auto x = d.train.images.to(torch::kDouble) / 255.0;
  EXPECT_NEAR(d.mean, x.mean().item<double>(), 1e-12);
  EXPECT_NEAR(d.std, x.std(/*unbiased=*/false).item<double>(), 1e-9);
  ASSERT_EQ(d.channel_mean.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    auto xc = x.select(1, c);
    EXPECT_NEAR(d.channel_mean[static_cast<size_t>(c)], xc.mean().item<double>(), 1e-12);
    EXPECT_NEAR(d.channel_std[static_cast<size_t>(c)], xc.std(false).item<double>(), 1e-9);
  }
  EXPECT_NE(d.channel_mean[0], d.channel_mean[1]);
}

TEST(CifarDataset, MissingOrBrokenFilesAreCaughtBeforeReading) {
  TempDir dir;
  std::string root = dir.str("cifar-10-batches-bin");
  std::string msg = error_of([&] { check_dataset_files(cifar_spec("cifar10", root)); });
  EXPECT_NE(msg.find(root), std::string::npos) << msg;
  EXPECT_NE(msg.find("cifar-10-binary.tar.gz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("docs/data.md"), std::string::npos) << msg;

  write_tiny_cifar(root, 10, 5);
  fs::remove(fs::path(root) / "data_batch_4.bin");
  msg = error_of([&] { check_dataset_files(cifar_spec("cifar10", root)); });
  EXPECT_NE(msg.find((fs::path(root) / "data_batch_4.bin").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("docs/data.md"), std::string::npos) << msg;

  write_tiny_cifar(root, 10, 5);
  const std::string test_file = (fs::path(root) / "test_batch.bin").string();
  write_file(test_file, read_file(test_file) + "x");
  msg = error_of([&] { check_dataset_files(cifar_spec("cifar10", root)); });
  EXPECT_NE(msg.find(test_file), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 bytes over"), std::string::npos) << msg;

  // CIFAR-100 looks for its own two files.
  msg = error_of([&] { load_dataset(cifar_spec("cifar100", root)); });
  EXPECT_NE(msg.find("train.bin"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ddplab::data
