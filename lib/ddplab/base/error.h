// The one error type for user errors: a bad spec value, a missing or corrupt data file,
// a bad command-line argument. The message names the culprit (JSON pointer, file, rank)
// and what was expected. The CLI maps it to exit code 2. Broken invariants use
// TORCH_INTERNAL_ASSERT instead; other exceptions are runtime failures (exit code 1).
#pragma once
#include <exception>
#include <stdexcept>
#include <string>

namespace ddplab {
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An exception's text for a person (the terminal, a manifest, a rank's error file): what() for
// most, but c10::Error (LibTorch, c10d) without the C++ backtrace its what() carries.
std::string message_of(const std::exception& e);
}  // namespace ddplab
