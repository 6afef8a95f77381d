#include "ddplab/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>

#include <fmt/format.h>

#include "ddplab/base/error.h"

namespace ddplab::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The whole file as stored: MNIST files are at most 47 MB, so one buffer is simplest.
std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read error");
  return out;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

struct Header {
  std::vector<int64_t> dims;
  size_t header_bytes = 0;
  size_t total_bytes = 0;  // header_bytes + product(dims): the size of a valid file
};

// Checks the header at the start of data[0, size). Returns false while `size` bytes are too
// few to hold it; the caller reports the truncation once it knows no more bytes will come.
bool parse_header(const uint8_t* data, size_t size, const std::string& name, Header* out) {
  if (size < 4) return false;
  if (data[0] != 0 || data[1] != 0) throw Error(name + ": bad magic: not an IDX file");
  if (data[2] != 0x08)
    throw Error(fmt::format("{}: unsupported IDX element type 0x{:02x} (only 0x08, unsigned byte, is supported)", name,
                            data[2]));
  int ndims = data[3];
  if (ndims < 1 || ndims > 4) {
    throw Error(fmt::format("{}: unsupported number of dimensions {} (1..4)", name, ndims));
  }
  size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (size < header) return false;
  std::vector<int64_t> dims;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* p = data + 4 + 4 * i;
    uint32_t d = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    if (d == 0) throw Error(fmt::format("{}: dimension {} is 0", name, i));
    dims.push_back(d);
  }
  // Product of up to four uint32 can overflow int64 only for absurd headers; cap it.
  int64_t count = 1;
  for (int64_t d : dims) {
    if (count > (int64_t{1} << 40) / d) throw Error(name + ": implausible dimensions");
    count *= d;
  }
  out->dims = std::move(dims);
  out->header_bytes = header;
  out->total_bytes = header + static_cast<size_t>(count);
  return true;
}

// The array in data[0, size), the decompressed file. `cut`: the decompression stopped
// early because the data already ran past what the header declares.
IdxArray decode_image(const uint8_t* data, size_t size, const std::string& name, bool cut) {
  Header h;
  if (!parse_header(data, size, name, &h)) {
    size_t needed = size < 4 ? 4 : 4 + 4 * static_cast<size_t>(data[3]);
    throw Error(fmt::format("{}: truncated: expected at least {} bytes of header, found {}", name, needed, size));
  }
  if (cut) {
    throw Error(fmt::format("{}: unexpected trailing bytes: expected {} bytes, found more", name, h.total_bytes));
  }
  if (size < h.total_bytes) {
    throw Error(fmt::format("{}: truncated: expected {} bytes, found {}", name, h.total_bytes, size));
  }
  if (size > h.total_bytes) {
    throw Error(fmt::format("{}: {} unexpected trailing bytes: expected {} bytes, found {}", name, size - h.total_bytes,
                            h.total_bytes, size));
  }
  IdxArray arr;
  arr.dims = std::move(h.dims);
  arr.bytes.assign(data + h.header_bytes, data + size);
  return arr;
}

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

// inflateEnd on every way out of gunzip.
struct InflateStream {
  z_stream s{};
  InflateStream() {
    if (inflateInit2(&s, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
  }
  ~InflateStream() { inflateEnd(&s); }
  InflateStream(const InflateStream&) = delete;
  InflateStream& operator=(const InflateStream&) = delete;
};

// Inflates gzip data[0, size), concatenated members as one stream; bytes after the last
// member that do not start another are ignored (as zlib's gzread does). Stops, setting *cut,
// once the output holds more than the IDX header at its start declares.
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& name, bool* cut) {
  constexpr size_t kChunk = size_t{1} << 16;
  InflateStream z;
  std::vector<uint8_t> out;
  size_t fed = 0;  // bytes of data handed to zlib so far
  size_t limit = SIZE_MAX;
  bool have_header = false;
  *cut = false;
  while (true) {
    if (z.s.avail_in == 0 && fed < size) {
      size_t n = std::min<size_t>(size - fed, UINT_MAX);
      z.s.next_in = const_cast<Bytef*>(data + fed);
      z.s.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    size_t old = out.size();
    out.resize(old + kChunk);
    z.s.next_out = out.data() + old;
    z.s.avail_out = static_cast<uInt>(kChunk);
    int rc = inflate(&z.s, Z_NO_FLUSH);
    out.resize(old + kChunk - z.s.avail_out);
    if (!have_header) {
      Header h;
      have_header = parse_header(out.data(), out.size(), name, &h);
      if (have_header) limit = h.total_bytes;
    }
    if (out.size() > limit) {
      *cut = true;
      return out;
    }
    if (rc == Z_STREAM_END) {
      size_t left = z.s.avail_in + (size - fed);
      const uint8_t* next = data + (size - left);
      if (!is_gzip(next, left)) return out;
      if (inflateReset(&z.s) != Z_OK) throw Error(name + ": gzip read error");
      continue;
    }
    if (rc == Z_BUF_ERROR && z.s.avail_in == 0 && fed == size)
      throw Error(name + ": gzip read error: unexpected end of file");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw Error(name + ": gzip read error: " + (z.s.msg != nullptr ? z.s.msg : zError(rc)));
  }
}

}  // namespace

IdxArray decode_idx(const uint8_t* data, size_t size, bool gzip, const std::string& name) {
  if (!gzip || !is_gzip(data, size)) return decode_image(data, size, name, false);
  bool cut = false;
  std::vector<uint8_t> image = gunzip(data, size, name, &cut);
  return decode_image(image.data(), image.size(), name, cut);
}

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> stored = read_file(path);
  return decode_idx(stored.data(), stored.size(), ends_with(path, ".gz"), path);
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& bytes,
               bool gzip) {
  if (dims.empty() || dims.size() > 4) throw Error(path + ": IDX needs 1..4 dimensions");
  for (int64_t d : dims) {
    if (d <= 0 || d > 0xffffffffLL) throw Error(fmt::format("{}: bad IDX dimension {}", path, d));
  }
  if (static_cast<int64_t>(bytes.size()) != product(dims)) {
    throw Error(fmt::format("{}: {} bytes do not match dims ({})", path, bytes.size(), product(dims)));
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
    bool ok = gzwrite(f, header.data(), static_cast<unsigned>(header.size())) == static_cast<int>(header.size());
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
