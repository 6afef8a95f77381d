#include "ddplab/base/sha256.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "test_util.h"

namespace ddplab {
namespace {

// FIPS 180-4's examples, as `sha256sum` prints them.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesHashAsTheWhole) {
  const std::string text(1000, 'x');
  Sha256 h;
  for (size_t at = 0, n = 1; at < text.size(); at += n, n = n * 3 % 97 + 1)
    h.update(text.data() + at, std::min(n, text.size() - at));
  EXPECT_EQ(h.hex_digest(), sha256_hex(text));
}

TEST(Sha256, AFileHashesAsItsBytesAndAMissingOneIsAnErrorNamingIt) {
  testing::TempDir tmp;
  testing::write_file(tmp.path() / "f", "abc");
  EXPECT_EQ(sha256_file(tmp.path() / "f"), sha256_hex("abc"));
  const std::string message = testing::error_of([&] { sha256_file(tmp.path() / "missing"); });
  EXPECT_NE(message.find((tmp.path() / "missing").string() + ": cannot open"), std::string::npos) << message;
}

}  // namespace
}  // namespace ddplab
