// The one error type for user errors: a bad spec value, a missing or corrupt data file,
// a bad command-line argument. The message names the culprit (JSON pointer, file, rank)
// and what was expected. The CLI maps it to exit code 2. Broken invariants use
// TORCH_INTERNAL_ASSERT instead; other exceptions are runtime failures (exit code 1).
#pragma once
#include <stdexcept>
#include <string>

namespace ddplab {
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};
}  // namespace ddplab
