#include <zlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/data/idx.h"
#include "test_util.h"

namespace ddplab::data {
namespace {

using ddplab::testing::error_of;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

TEST(IdxReader, RoundTripsRawAndGzip) {
  TempDir dir;
  auto bytes = iota_bytes(3 * 4 * 5);
  for (bool gz : {false, true}) {
    std::string path = dir.str(gz ? "a.gz" : "a");
    write_idx(path, {3, 4, 5}, bytes, gz);
    IdxArray arr = read_idx(path);
    EXPECT_EQ(arr.dims, (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(arr.bytes, bytes);
  }
  // The gzip file really is compressed (gzip magic), the raw one has the IDX magic.
  std::string gz = read_file(dir.str("a.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(gz[1]), 0x8b);
  std::string raw = read_file(dir.str("a"));
  ASSERT_EQ(raw.size(), 16u + 60u);
  EXPECT_EQ(raw.substr(0, 8), std::string("\0\0\x08\x03\0\0\0\x03", 8));  // big-endian dims
}

TEST(IdxReader, OneDimensionalLabels) {
  TempDir dir;
  write_idx(dir.str("l"), {10}, iota_bytes(10), false);
  IdxArray arr = read_idx(dir.str("l"));
  EXPECT_EQ(arr.dims, (std::vector<int64_t>{10}));
  EXPECT_EQ(arr.bytes.size(), 10u);
}

TEST(IdxReader, TruncatedFileNamesFileAndByteCounts) {
  TempDir dir;
  std::string path = dir.str("train-images-idx3-ubyte");
  write_idx(path, {2, 28, 28}, iota_bytes(2 * 28 * 28), false);
  std::string full = read_file(path);
  write_file(path, full.substr(0, 1000));
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated: expected 1584 bytes, found 1000"), std::string::npos) << msg;
}

TEST(IdxReader, TruncatedGzipFile) {
  TempDir dir;
  std::string path = dir.str("x.gz");
  // A well-formed gzip stream whose IDX content is short: header claims {200, 2}, 88 data bytes.
  std::string body = std::string("\0\0\x08\x02\0\0\0\xc8\0\0\0\x02", 12) + std::string(88, 'a');
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, body.data(), static_cast<unsigned>(body.size())), 100);
  ASSERT_EQ(gzclose(f), Z_OK);
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated: expected 412 bytes, found 100"), std::string::npos) << msg;
}

TEST(IdxReader, BadMagicAndType) {
  TempDir dir;
  std::string path = dir.str("bad");
  write_file(path, std::string("\x01\x00\x08\x01\0\0\0\x01\x05", 9));
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;

  write_file(path, std::string("\0\0\x0d\x01\0\0\0\x01\x05", 9));  // 0x0d: float
  msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find("0x0d"), std::string::npos) << msg;

  write_file(path, std::string("\0\0\x08\x05", 4));  // 5 dims
  msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find("dimensions"), std::string::npos) << msg;

  write_file(path, std::string("\0\0\x08\x01\0\0\0\0", 8));  // a 0 dimension
  msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find("is 0"), std::string::npos) << msg;

  write_file(path, "");
  msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(IdxReader, TrailingBytesAreAnError) {
  TempDir dir;
  std::string path = dir.str("t");
  write_idx(path, {4}, iota_bytes(4), false);
  write_file(path, read_file(path) + "xyz");
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 12 bytes, found 15"), std::string::npos) << msg;
}

TEST(IdxReader, MissingFile) {
  TempDir dir;
  for (std::string name : {"nope", "nope.gz"}) {
    std::string path = dir.str(name);
    std::string msg = error_of([&] { read_idx(path); });
    EXPECT_NE(msg.find(path + ": cannot open"), std::string::npos) << msg;
  }
}

TEST(IdxReader, CorruptGzip) {
  TempDir dir;
  std::string path = dir.str("c.gz");
  write_idx(path, {1000}, iota_bytes(1000), true);
  std::string gz = read_file(path);
  write_file(path, gz.substr(0, gz.size() / 2));  // cut the deflate stream
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

// Writes `body` gzip-compressed to `path` (one member).
void write_gzip(const std::string& path, const std::string& body) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, body.data(), static_cast<unsigned>(body.size())), static_cast<int>(body.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

TEST(IdxReader, DecodesBytesInMemoryLikeTheFile) {
  TempDir dir;
  auto bytes = iota_bytes(2 * 3);
  for (bool gz : {false, true}) {
    std::string path = dir.str(gz ? "m.gz" : "m");
    write_idx(path, {2, 3}, bytes, gz);
    auto stored = bytes_of(read_file(path));
    IdxArray arr = decode_idx(stored.data(), stored.size(), gz, "memory");
    EXPECT_EQ(arr.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(arr.bytes, bytes);
  }
  std::string msg = error_of([&] { decode_idx(nullptr, 0, true, "nothing.gz"); });
  EXPECT_EQ(msg, "nothing.gz: truncated: expected at least 4 bytes of header, found 0");
}

// zlib's gzread, which read .gz files before decode_idx, reads concatenated members as one
// stream and a .gz file that is not gzip data as it is; decode_idx keeps both.
TEST(IdxReader, ConcatenatedGzipMembersAreOneStream) {
  TempDir dir;
  std::string body = std::string("\0\0\x08\x01\0\0\0\x06", 8) + "abcdef";
  write_gzip(dir.str("a.gz"), body.substr(0, 5));
  write_gzip(dir.str("b.gz"), body.substr(5));
  std::string path = dir.str("ab.gz");
  write_file(path, read_file(dir.str("a.gz")) + read_file(dir.str("b.gz")));
  IdxArray arr = read_idx(path);
  EXPECT_EQ(arr.dims, (std::vector<int64_t>{6}));
  EXPECT_EQ(std::string(arr.bytes.begin(), arr.bytes.end()), "abcdef");
}

TEST(IdxReader, GzFileThatIsNotGzipIsReadAsItIs) {
  TempDir dir;
  std::string path = dir.str("unpacked-by-a-browser.gz");
  write_idx(path, {3}, iota_bytes(3), false);
  EXPECT_EQ(read_idx(path).bytes, iota_bytes(3));
}

// A small .gz file may inflate to gigabytes; decompression stops once the data outgrows the
// size its IDX header declares instead of holding all of it.
TEST(IdxReader, GzipThatOutgrowsItsHeaderStopsEarly) {
  TempDir dir;
  std::string path = dir.str("bomb.gz");
  write_gzip(path, std::string("\0\0\x08\x01\0\0\0\x04", 8) + std::string(size_t{64} << 20, 'z'));
  EXPECT_LT(read_file(path).size(), size_t{1} << 20);
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_EQ(msg, path + ": unexpected trailing bytes: expected 12 bytes, found more");
}

TEST(IdxWriter, RejectsSizeMismatch) {
  TempDir dir;
  std::string msg = error_of([&] { write_idx(dir.str("w"), {2, 3}, iota_bytes(5), false); });
  EXPECT_NE(msg.find(dir.str("w")), std::string::npos) << msg;
  msg = error_of([&] { write_idx(dir.str("missing-dir/w"), {1}, iota_bytes(1), true); });
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ddplab::data
