// Where this process's calls into the C++ standard library land at run time.
//
// Some LibTorch builds (the 2.11 CUDA 13 wheel) carry statically linked copies of parts of
// libstdc++ and export them: libtorch.so defines std::filesystem::remove_all and 63 more. A program
// whose own calls bind to those copies mixes two implementations of std::filesystem and crashes
// (docs/architecture.md, "libstdc++ first"). The build links libstdc++.so.6 ahead of LibTorch so
// this cannot happen by link order; ddplab checks at start-up that it did not happen anyway (an
// LD_PRELOAD, a toolchain that links libstdc++ statically) and refuses to run if it did.
#pragma once
#include <string>
#include <vector>

namespace ddplab {

// One probed standard-library function and the file it resolved to (dladdr), e.g.
// {"std::filesystem::remove_all(path, error_code)", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"}.
struct StdlibBinding {
  std::string function;
  std::string library;
};

// The std::filesystem functions ddplab calls that LibTorch builds are known to export, each with
// the shared object its address resolves to in this process.
std::vector<StdlibBinding> stdlib_bindings();

// Empty when every probe of stdlib_bindings() resolves into a library named libstdc++.so*; else a
// message that names the first function, the library it landed in and what to do.
std::string stdlib_binding_problem();

}  // namespace ddplab
