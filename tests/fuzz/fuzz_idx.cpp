// libFuzzer target: the IDX reader (data::decode_idx, what read_idx runs on a file's bytes).
// The first input byte picks the mode, the rest is the file: bit 0 set, the file is a ".gz"
// one (gzip data, or anything else, which is read as it is). Whenever the rest decodes as a
// raw file, it is also gzip-compressed here, as one member or split in two members at a point
// the second byte picks, and must decode to the same array.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ddplab/base/error.h"
#include "ddplab/data/idx.h"
#include "fuzz_check.h"

namespace {

// One gzip member holding data[0, size).
std::vector<uint8_t> gzip_member(const uint8_t* data, size_t size) {
  z_stream s{};
  DDPLAB_FUZZ_CHECK(deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&s, size));
  s.next_in = const_cast<Bytef*>(data);
  s.avail_in = static_cast<uInt>(size);
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  DDPLAB_FUZZ_CHECK(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(out.size() - s.avail_out);
  deflateEnd(&s);
  return out;
}

void check_array(const ddplab::data::IdxArray& arr) {
  DDPLAB_FUZZ_CHECK(!arr.dims.empty() && arr.dims.size() <= 4);
  size_t count = 1;
  for (int64_t d : arr.dims) {
    DDPLAB_FUZZ_CHECK(d > 0);
    count *= static_cast<size_t>(d);
  }
  DDPLAB_FUZZ_CHECK(arr.bytes.size() == count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddplab;
  if (size == 0) return 0;
  const bool gzip = (data[0] & 1) != 0;
  const uint8_t* file = data + 1;
  const size_t file_size = size - 1;
  data::IdxArray arr;
  try {
    arr = data::decode_idx(file, file_size, gzip, gzip ? "fuzz.idx.gz" : "fuzz.idx");
  } catch (const Error&) {
    return 0;
  }
  check_array(arr);
  if (gzip) return 0;
  std::vector<uint8_t> gz = gzip_member(file, file_size);
  data::IdxArray again = data::decode_idx(gz.data(), gz.size(), true, "fuzz.idx.gz");
  DDPLAB_FUZZ_CHECK(again.dims == arr.dims && again.bytes == arr.bytes);
  const size_t split = file_size == 0 ? 0 : file[file_size - 1] % file_size;
  std::vector<uint8_t> two = gzip_member(file, split);
  std::vector<uint8_t> second = gzip_member(file + split, file_size - split);
  two.insert(two.end(), second.begin(), second.end());
  again = data::decode_idx(two.data(), two.size(), true, "fuzz.idx.gz");
  DDPLAB_FUZZ_CHECK(again.dims == arr.dims && again.bytes == arr.bytes);
  return 0;
}
