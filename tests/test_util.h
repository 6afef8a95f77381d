// Helpers shared by the tests: temporary directories, running the ddplab binary, files.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ddplab::testing {

// A fresh directory under $TMPDIR, removed (recursively) when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& child = "") const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

// Runs `command` through /bin/sh, capturing stdout and stderr.
CommandResult run_command(const std::string& command);

// Runs build/bin/ddplab with `args` (already shell-quoted as needed).
CommandResult run_ddplab(const std::string& args);

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);

// Writes a small MNIST-format dataset (4 IDX files, gzip or raw) of `train` and `test`
// images of 28x28 whose labels are learnable: class c has a bright c-th horizontal band.
void write_tiny_mnist(const std::filesystem::path& dir, int train, int test, bool gzip, unsigned seed = 7);

}  // namespace ddplab::testing
