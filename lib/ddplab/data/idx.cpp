#include "ddplab/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ddplab/error.h"

namespace ddplab::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The whole (decompressed) file: MNIST files are at most 47 MB, so one buffer is simplest.
std::vector<uint8_t> read_all(const std::string& path) {
  std::vector<uint8_t> out;
  if (ends_with(path, ".gz")) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) throw Error(path + ": cannot open: " + std::strerror(errno));
    std::vector<uint8_t> buf(1 << 20);
    while (true) {
      int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
      if (n < 0) {
        int code = 0;
        std::string msg = gzerror(f, &code);
        gzclose(f);
        throw Error(path + ": gzip read error: " + msg);
      }
      if (n == 0) break;
      out.insert(out.end(), buf.begin(), buf.begin() + n);
    }
    gzclose(f);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read error");
  return out;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> raw = read_all(path);
  if (raw.size() < 4) {
    throw Error(path + ": truncated: expected at least 4 bytes of header, found " +
                std::to_string(raw.size()));
  }
  if (raw[0] != 0 || raw[1] != 0) throw Error(path + ": bad magic: not an IDX file");
  if (raw[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", raw[2]);
    throw Error(path + ": unsupported IDX element type " + type +
                " (only 0x08, unsigned byte, is supported)");
  }
  int ndims = raw[3];
  if (ndims < 1 || ndims > 4) {
    throw Error(path + ": unsupported number of dimensions " + std::to_string(ndims) + " (1..4)");
  }
  size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (raw.size() < header) {
    throw Error(path + ": truncated: expected at least " + std::to_string(header) +
                " bytes of header, found " + std::to_string(raw.size()));
  }
  IdxArray arr;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* p = raw.data() + 4 + 4 * i;
    uint32_t d = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    if (d == 0) throw Error(path + ": dimension " + std::to_string(i) + " is 0");
    arr.dims.push_back(d);
  }
  // Product of up to four uint32 can overflow int64 only for absurd headers; cap it.
  int64_t count = 1;
  for (int64_t d : arr.dims) {
    if (count > (int64_t{1} << 40) / d) throw Error(path + ": implausible dimensions");
    count *= d;
  }
  size_t expected = header + static_cast<size_t>(count);
  if (raw.size() < expected) {
    throw Error(path + ": truncated: expected " + std::to_string(expected) + " bytes, found " +
                std::to_string(raw.size()));
  }
  if (raw.size() > expected) {
    throw Error(path + ": " + std::to_string(raw.size() - expected) +
                " unexpected trailing bytes: expected " + std::to_string(expected) +
                " bytes, found " + std::to_string(raw.size()));
  }
  arr.bytes.assign(raw.begin() + static_cast<std::ptrdiff_t>(header), raw.end());
  return arr;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& bytes, bool gzip) {
  if (dims.empty() || dims.size() > 4) throw Error(path + ": IDX needs 1..4 dimensions");
  for (int64_t d : dims) {
    if (d <= 0 || d > 0xffffffffLL) throw Error(path + ": bad IDX dimension " + std::to_string(d));
  }
  if (static_cast<int64_t>(bytes.size()) != product(dims)) {
    throw Error(path + ": " + std::to_string(bytes.size()) + " bytes do not match dims (" +
                std::to_string(product(dims)) + ")");
  }
  std::vector<uint8_t> header = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) {
    auto u = static_cast<uint32_t>(d);
    header.insert(header.end(), {static_cast<uint8_t>(u >> 24), static_cast<uint8_t>(u >> 16),
                                 static_cast<uint8_t>(u >> 8), static_cast<uint8_t>(u)});
  }
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
    bool ok = gzwrite(f, header.data(), static_cast<unsigned>(header.size())) ==
              static_cast<int>(header.size());
    // gzwrite takes an unsigned length; write in chunks to stay far below its limit.
    size_t pos = 0;
    while (ok && pos < bytes.size()) {
      size_t n = std::min<size_t>(bytes.size() - pos, 1 << 24);
      ok = gzwrite(f, bytes.data() + pos, static_cast<unsigned>(n)) == static_cast<int>(n);
      pos += n;
    }
    if (gzclose(f) != Z_OK) ok = false;
    if (!ok) throw Error(path + ": write failed");
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(path + ": write failed");
}

}  // namespace ddplab::data
