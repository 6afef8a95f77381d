#include "ddplab/data/cifar.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"

namespace ddplab::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSeeDocs = "; see docs/data.md";

int64_t label_bytes(CifarKind kind) { return kind == CifarKind::kCifar10 ? 1 : 2; }

std::string kind_name(CifarKind kind) { return kind == CifarKind::kCifar10 ? "CIFAR-10" : "CIFAR-100"; }

}  // namespace

int64_t cifar_record_bytes(CifarKind kind) { return label_bytes(kind) + kCifarPixels; }

int64_t cifar_classes(CifarKind kind) { return kind == CifarKind::kCifar10 ? 10 : 100; }

int64_t check_cifar_file(const std::string& path, CifarKind kind) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error("missing file " + path + kSeeDocs);
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw Error(path + ": cannot read its size: " + ec.message() + kSeeDocs);
  const int64_t record = cifar_record_bytes(kind);
  if (size == 0 || size % record != 0) {
    throw Error(
        fmt::format("{}: not a {} binary file: expected a positive multiple of {} bytes (records of {} "
                    "label byte(s) + 3072 pixel bytes), found {} bytes ({} whole records and {} bytes over: "
                    "truncated, or the wrong dataset?){}",
                    path, kind_name(kind), record, label_bytes(kind), size, size / record, size % record, kSeeDocs));
  }
  return size / record;
}

Dataset read_cifar(const std::vector<std::string>& paths, CifarKind kind) {
  std::vector<int64_t> counts;
  int64_t n = 0;
  for (const auto& path : paths) n += counts.emplace_back(check_cifar_file(path, kind));
  const int64_t record = cifar_record_bytes(kind), skip = label_bytes(kind);
  const int64_t classes = cifar_classes(kind);
  Dataset set;
  set.images = torch::empty({n, 3, 32, 32}, torch::kUInt8);
  set.labels = torch::empty({n}, torch::kLong);
  uint8_t* pixels = set.images.data_ptr<uint8_t>();
  int64_t* labels = set.labels.data_ptr<int64_t>();
  std::vector<char> buf(static_cast<size_t>(record));
  int64_t at = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    std::ifstream in(paths[f], std::ios::binary);
    if (!in) throw Error(paths[f] + ": cannot open: " + std::strerror(errno) + kSeeDocs);
    for (int64_t i = 0; i < counts[f]; ++i, ++at) {
      if (!in.read(buf.data(), record)) throw Error(fmt::format("{}: read error at record {}", paths[f], i));
      const auto* r = reinterpret_cast<const uint8_t*>(buf.data());
      if (kind == CifarKind::kCifar100 && r[0] >= 20) {
        throw Error(fmt::format("{}: coarse label {} of record {} is not < 20 (not a CIFAR-100 binary file?){}",
                                paths[f], r[0], i, kSeeDocs));
      }
      const uint8_t label = r[skip - 1];
      if (label >= classes) {
        throw Error(fmt::format("{}: label {} of record {} is not < {} (not a {} binary file?){}", paths[f], label, i,
                                classes, kind_name(kind), kSeeDocs));
      }
      labels[at] = label;
      std::memcpy(pixels + at * kCifarPixels, r + skip, kCifarPixels);
    }
  }
  return set;
}

void write_cifar(const std::string& path, CifarKind kind, const std::vector<uint8_t>& labels,
                 const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& coarse) {
  const size_t n = labels.size();
  if (pixels.size() != n * kCifarPixels) {
    throw Error(fmt::format("{}: {} pixel bytes do not match {} records of {}", path, pixels.size(), n, kCifarPixels));
  }
  if (kind == CifarKind::kCifar100 && !coarse.empty() && coarse.size() != n)
    throw Error(fmt::format("{}: {} coarse labels for {} records", path, coarse.size(), n));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  for (size_t i = 0; i < n; ++i) {
    if (kind == CifarKind::kCifar100) out.put(static_cast<char>(coarse.empty() ? labels[i] / 5 : coarse[i]));
    out.put(static_cast<char>(labels[i]));
    out.write(reinterpret_cast<const char*>(pixels.data() + i * kCifarPixels), kCifarPixels);
  }
  out.close();
  if (!out) throw Error(path + ": write failed");
}

}  // namespace ddplab::data
