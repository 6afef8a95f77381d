// The IDX file format of MNIST, Fashion-MNIST, KMNIST and friends, raw or gzip-compressed.
//
// Layout: magic (0x00 0x00 type ndims), ndims big-endian uint32 sizes, then the data.
// ddplab reads type 0x08 (unsigned byte), the type of every MNIST-family file. A file whose
// name ends in ".gz" is decompressed with zlib (concatenated gzip members are read as one
// stream, as gzip(1) does; a ".gz" file that is not gzip data, e.g. one a browser already
// unpacked, is read as it is). Every check failure is a ddplab::Error that names the file:
// bad magic, unsupported type, a dimension of 0, or a size mismatch
// ("train-images-idx3-ubyte: truncated: expected 47040016 bytes, found 1000").
// Decompression stops as soon as the data outgrows what the header declares, so a small
// corrupt or hostile .gz file never makes ddplab hold more than a valid file of that header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddplab::data {

struct IdxArray {
  std::vector<int64_t> dims;   // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> bytes;  // row-major, product(dims) bytes
};

IdxArray read_idx(const std::string& path);

// The same for a file's contents already in memory: `data` is the file as stored (gzip data
// when `gzip`), `name` names it in errors. read_idx(path) is decode_idx(contents of path,
// path ends in ".gz", path).
IdxArray decode_idx(const uint8_t* data, size_t size, bool gzip, const std::string& name);

// Writes an unsigned-byte IDX file (gzip-compressed when `gzip`). Used by the tests to make
// small files in the real format, and by tools. Throws Error if the file cannot be written or
// bytes.size() != product(dims).
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& bytes, bool gzip);

}  // namespace ddplab::data
