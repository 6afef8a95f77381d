// SHA-256 (FIPS 180-4) of bytes and of files, as lowercase hex: what `sha256sum` prints, so a user
// can check a hash ddplab recorded (a run's manifest "inputs", rundir/inputs.h) by hand.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ddplab {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // The digest of everything updated so far, as 64 hex digits; the object is spent afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// The hash of the file's bytes, read in 1 MiB pieces. Throws ddplab::Error naming the file when it
// cannot be read.
std::string sha256_file(const std::filesystem::path& file);

}  // namespace ddplab
