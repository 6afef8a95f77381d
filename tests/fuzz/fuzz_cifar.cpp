// libFuzzer target: the CIFAR-10/100 binary reader (data::read_cifar). The first input byte
// picks the format (bit 0: CIFAR-100) and, with bit 1, splits the rest into two files at a point
// the second byte picks (read_cifar concatenates files); the rest is the file contents, written
// to a temporary file because read_cifar reads files. Whatever the bytes, read_cifar either
// throws ddplab::Error or returns exactly size / record_bytes records with labels in range.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/data/cifar.h"
#include "fuzz_check.h"

namespace {

std::string write_temp(const std::string& suffix, const uint8_t* data, size_t size) {
  const std::string path = "/tmp/ddplab_fuzz_cifar_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  DDPLAB_FUZZ_CHECK(f != nullptr);
  DDPLAB_FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, f) == size);
  DDPLAB_FUZZ_CHECK(std::fclose(f) == 0);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddplab;
  if (size < 2) return 0;
  const auto kind = (data[0] & 1) != 0 ? data::CifarKind::kCifar100 : data::CifarKind::kCifar10;
  const bool two_files = (data[0] & 2) != 0;
  const uint8_t* file = data + 2;
  const size_t file_size = size - 2;
  const size_t split = two_files && file_size > 0 ? data[1] * file_size / 256 : file_size;
  std::vector<std::string> paths{write_temp(".a.bin", file, split)};
  if (two_files) paths.push_back(write_temp(".b.bin", file + split, file_size - split));
  const int64_t record = data::cifar_record_bytes(kind);
  try {
    data::Dataset set = data::read_cifar(paths, kind);
    // Every file held whole records only, so all of them were read.
    const int64_t n = set.labels.size(0);
    DDPLAB_FUZZ_CHECK(n * record == static_cast<int64_t>(file_size));
    DDPLAB_FUZZ_CHECK(set.images.size(0) == n && set.images.numel() == n * data::kCifarPixels);
    if (n > 0) {
      DDPLAB_FUZZ_CHECK(set.labels.min().item<int64_t>() >= 0);
      DDPLAB_FUZZ_CHECK(set.labels.max().item<int64_t>() < data::cifar_classes(kind));
    }
  } catch (const Error&) {
  }
  for (const auto& p : paths) std::remove(p.c_str());
  return 0;
}
