// The binary formats of CIFAR-10 and CIFAR-100 ("CIFAR-10 binary version" on the CIFAR page).
//
// A file is a sequence of fixed-size records, no header:
//   CIFAR-10   1 label byte (0..9), then 3072 pixel bytes                       (3073 bytes)
//   CIFAR-100  1 coarse label byte (0..19), 1 fine label byte (0..99), then 3072 (3074 bytes)
// The 3072 pixel bytes are three 32x32 planes, red, green, blue, each row-major: exactly the
// [3, 32, 32] CHW layout of a tensor, so records are copied as they are. For CIFAR-100 the fine
// label (100 classes) is the label; the coarse one is checked and dropped.
//
// read_cifar() concatenates files in the order given into uint8 images [N, 3, 32, 32] and int64
// labels [N]. Every check failure is a ddplab::Error that names the file: a size that is not a
// positive multiple of the record size ("data_batch_1.bin: ... expected a positive multiple of
// 3073 bytes ..., found 30729000 bytes (9999 whole records and 2073 bytes over ...)"), a label out
// of range (with its record index). Messages point to docs/data.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ddplab/data/dataset.h"

namespace ddplab::data {

enum class CifarKind { kCifar10, kCifar100 };

constexpr int64_t kCifarPixels = 3 * 32 * 32;

// Bytes per record: 3073 (CIFAR-10) or 3074 (CIFAR-100).
int64_t cifar_record_bytes(CifarKind kind);
int64_t cifar_classes(CifarKind kind);  // 10 or 100

// Checks that `path` exists and its size is a positive multiple of the record size, without
// reading it (cheap: used before a run directory is made). Returns the number of records.
int64_t check_cifar_file(const std::string& path, CifarKind kind);

// Reads and checks every file, in order, into one Dataset.
Dataset read_cifar(const std::vector<std::string>& paths, CifarKind kind);

// Writes records in the binary format (used by the tests to make small files in the real
// format). `pixels` holds labels.size() images of 3072 bytes; for CIFAR-100 `coarse` gives the
// coarse labels (empty: fine / 5). Throws Error if the sizes disagree or the file cannot be written.
void write_cifar(const std::string& path, CifarKind kind, const std::vector<uint8_t>& labels,
                 const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& coarse = {});

}  // namespace ddplab::data
