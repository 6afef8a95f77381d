// How the programs are linked: the standard-library calls of ddplab's own code must reach
// libstdc++.so.6, not the copies some LibTorch builds export (base/stdlib_binding.h).
#include "ddplab/base/stdlib_binding.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace ddplab {
namespace {

using testing::run_command;
using testing::run_ddplab;

TEST(StdlibBinding, EveryProbeOfTheTestBinaryLandsInLibstdcxx) {
  const auto bindings = stdlib_bindings();
  ASSERT_FALSE(bindings.empty());
  for (const auto& b : bindings)
    EXPECT_NE(b.library.find("/libstdc++.so"), std::string::npos) << b.function << " is bound in " << b.library;
  EXPECT_EQ(stdlib_binding_problem(), "");
}

TEST(StdlibBinding, DdplabRunsWhenBoundToLibstdcxx) {
  const auto plain = run_ddplab("--version");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("libstdc++.so.6"), std::string::npos) << plain.output;
}

// A library that exports its own std::filesystem::remove_all, preloaded as a LibTorch build that
// exports one is linked: ddplab must refuse to start and name the function and the library.
TEST(StdlibBinding, DdplabRefusesToRunWhenAnotherLibraryInterposesStdFilesystem) {
  const auto preloaded = run_command(fmt::format("LD_PRELOAD={} {} --version", DDPLAB_STDFS_INTERPOSER, DDPLAB_BIN));
  EXPECT_EQ(preloaded.exit_code, 1) << preloaded.output;
  EXPECT_NE(preloaded.output.find("std::filesystem::remove_all(path) resolves to"), std::string::npos)
      << preloaded.output;
  EXPECT_NE(preloaded.output.find(DDPLAB_STDFS_INTERPOSER), std::string::npos) << preloaded.output;
  EXPECT_NE(preloaded.output.find("libstdc++ first"), std::string::npos) << preloaded.output;
}

}  // namespace
}  // namespace ddplab
