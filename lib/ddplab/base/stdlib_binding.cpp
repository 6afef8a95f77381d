#include "ddplab/base/stdlib_binding.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace ddplab {
namespace {

namespace fs = std::filesystem;

std::string library_of(const void* function) {
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "(no shared object)";
  return info.dli_fname;
}

template <typename Function>
StdlibBinding probe(const char* name, Function* function) {
  return {name, library_of(reinterpret_cast<const void*>(function))};
}

}  // namespace

std::vector<StdlibBinding> stdlib_bindings() {
  using Path = const fs::path&;
  using Code = std::error_code&;
  return {
      probe("std::filesystem::remove_all(path)", static_cast<std::uintmax_t (*)(Path)>(&fs::remove_all)),
      probe("std::filesystem::remove_all(path, error_code)",
            static_cast<std::uintmax_t (*)(Path, Code)>(&fs::remove_all)),
      probe("std::filesystem::remove(path)", static_cast<bool (*)(Path)>(&fs::remove)),
      probe("std::filesystem::create_directories(path, error_code)",
            static_cast<bool (*)(Path, Code)>(&fs::create_directories)),
      probe("std::filesystem::status(path, error_code)", static_cast<fs::file_status (*)(Path, Code)>(&fs::status)),
      probe("std::filesystem::file_size(path, error_code)",
            static_cast<std::uintmax_t (*)(Path, Code)>(&fs::file_size)),
  };
}

std::string stdlib_binding_problem() {
  for (const auto& b : stdlib_bindings()) {
    const auto slash = b.library.rfind('/');
    const std::string file = slash == std::string::npos ? b.library : b.library.substr(slash + 1);
    if (file.rfind("libstdc++.so", 0) == 0) continue;
    return fmt::format(
        "{} resolves to {}, not to libstdc++.so.6: this program would mix two copies of the C++ standard "
        "library and crash. Relink it with libstdc++.so.6 ahead of LibTorch (CMakeLists.txt does; a "
        "toolchain that links libstdc++ statically or an LD_PRELOAD undoes it): docs/architecture.md, "
        "\"libstdc++ first\"",
        b.function, b.library);
  }
  return "";
}

}  // namespace ddplab
