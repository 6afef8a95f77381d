// A shared library that exports its own std::filesystem::remove_all(const path&), as the 2.11 CUDA
// wheel's libtorch.so does; stdlib_binding_test preloads it into ddplab. It is never called.
#include <cstdlib>
#include <filesystem>

namespace std::filesystem {
std::uintmax_t remove_all(const path&) { std::abort(); }
}  // namespace std::filesystem
