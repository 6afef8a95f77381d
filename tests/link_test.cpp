// How the programs are linked: the standard library calls of ddplab's own code must reach the
// system libstdc++, not copies that some LibTorch builds export (see CMakeLists.txt: with the 2.11
// CUDA 13 wheel, std::filesystem::remove_all bound into libtorch.so and crashed).
#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace ddplab {
namespace {

std::string library_of(const void* function) {
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

TEST(Link, StdFilesystemComesFromTheSystemLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  const auto remove_all = static_cast<RemoveAll>(&std::filesystem::remove_all);
  const std::string library = library_of(reinterpret_cast<const void*>(remove_all));
  EXPECT_NE(library.find("libstdc++"), std::string::npos) << "std::filesystem::remove_all is bound in " << library;
}

}  // namespace
}  // namespace ddplab
