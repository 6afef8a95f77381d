#include "ddplab/data/cifar.h"

#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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
    throw Error(path + ": not a " + kind_name(kind) + " binary file: expected a positive multiple of " +
                std::to_string(record) + " bytes (records of " + std::to_string(label_bytes(kind)) +
                " label byte(s) + 3072 pixel bytes), found " + std::to_string(size) + " bytes (" +
                std::to_string(size / record) + " whole records and " + std::to_string(size % record) +
                " bytes over: truncated, or the wrong dataset?)" + kSeeDocs);
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
      if (!in.read(buf.data(), record)) throw Error(paths[f] + ": read error at record " + std::to_string(i));
      const auto* r = reinterpret_cast<const uint8_t*>(buf.data());
      if (kind == CifarKind::kCifar100 && r[0] >= 20) {
        throw Error(paths[f] + ": coarse label " + std::to_string(r[0]) + " of record " + std::to_string(i) +
                    " is not < 20 (not a CIFAR-100 binary file?)" + kSeeDocs);
      }
      const uint8_t label = r[skip - 1];
      if (label >= classes) {
        throw Error(paths[f] + ": label " + std::to_string(label) + " of record " + std::to_string(i) +
                    " is not < " + std::to_string(classes) + " (not a " + kind_name(kind) + " binary file?)" +
                    kSeeDocs);
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
    throw Error(path + ": " + std::to_string(pixels.size()) + " pixel bytes do not match " + std::to_string(n) +
                " records of " + std::to_string(kCifarPixels));
  }
  if (kind == CifarKind::kCifar100 && !coarse.empty() && coarse.size() != n)
    throw Error(path + ": " + std::to_string(coarse.size()) + " coarse labels for " + std::to_string(n) + " records");
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
