// scripts/stdlib-binding-repro.sh links this program four ways against a LibTorch that exports
// std::filesystem and shows where remove_all binds and whether it crashes. Not a unit test.
#include <dlfcn.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
int main() {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  Dl_info info{};
  dladdr(reinterpret_cast<const void*>(static_cast<RemoveAll>(&std::filesystem::remove_all)), &info);
  std::printf("remove_all bound in %s\n", info.dli_fname);
  std::fflush(stdout);
  const auto dir = std::filesystem::temp_directory_path() / "repro-dir";
  std::filesystem::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "f") << "x";
  std::error_code ec;
  std::printf("removed %ju entries\n", static_cast<std::uintmax_t>(std::filesystem::remove_all(dir, ec)));
}
