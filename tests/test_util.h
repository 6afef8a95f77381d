// Helpers shared by the tests: temporary directories, running the ddplab binary, files.
#pragma once
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"

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

// A disk that fills up in the middle of a write, for as long as the object lives: RLIMIT_FSIZE
// makes the kernel cut a write short at `bytes` and fail the next one (EFBIG), exactly as a full
// disk does (ENOSPC), on real files. SIGXFSZ is ignored meanwhile (it would kill the process).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limited = old_;
    limited.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit old_{};
  void (*previous_handler_)(int) = nullptr;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

// Whether `variable` is "1": scripts/test.sh sets DDPLAB_REQUIRE_BROWSER and DDPLAB_REQUIRE_SLURM so,
// making a test that would skip for want of chromium or a SLURM fail instead.
bool required_by_environment(const char* variable);

// Runs `command` through /bin/sh, capturing stdout and stderr.
CommandResult run_command(const std::string& command);

// Runs build/bin/ddplab with `args` (already shell-quoted as needed).
CommandResult run_ddplab(const std::string& args);

// The message of the ddplab::Error that `fn` throws; fails the test when it throws none.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ddplab::Error thrown";
  return "";
}

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);

// The operators dispatched on this thread while `fn` runs (ATen's RecordFunction, every call,
// nested ones too).
int64_t operators_dispatched(const std::function<void()>& fn);

// The ids of this process's threads now (the entries of /proc/self/task).
std::set<std::string> process_thread_ids();
// How many threads of `after` are not in `before` (two process_thread_ids()): the threads started
// in between and still there, not counting threads that ended meanwhile.
int64_t threads_started(const std::set<std::string>& before, const std::set<std::string>& after);

// The share of a parallel ATen op's results (x * 1 over 2^20 denormal floats, split among the
// calling thread's intra-op pool) that kept their denormal value: 1 where no thread of the pool
// flushes, 0 where all do.
double share_of_denormals_kept();

// Sets ATen's intra-op threads to `n` (and starts this thread's OpenMP team, so that a count of
// threads after it sees only the threads others start); puts back the old number when it ends.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n);
  ~IntraOpThreads();
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int old_;
};

// A Chrome trace of runtime::StepProfiler: for each "ProfilerStep#<n>" range, n and the names of
// the operators (cpu_op events) that began inside it, in the order they began.
std::map<int64_t, std::vector<std::string>> traced_steps(const std::filesystem::path& trace);

// Writes a small MNIST-format dataset (4 IDX files, gzip or raw) of `train` and `test`
// images of 28x28 whose labels are learnable: class c has a bright c-th horizontal band.
void write_tiny_mnist(const std::filesystem::path& dir, int train, int test, bool gzip, unsigned seed = 7);

// Writes a small dataset in the CIFAR binary format under `dir`: for CIFAR-10 data_batch_1.bin ..
// data_batch_5.bin (the `train` images split as evenly as possible, the first files taking the
// remainder) and test_batch.bin; for CIFAR-100 train.bin and test.bin. Images are 3x32x32 noise with
// a bright band in rows 2c..2c+3 (c = label mod 14) of channel (label mod 3), so labels are learnable.
void write_tiny_cifar(const std::filesystem::path& dir, int train, int test, bool cifar100 = false, unsigned seed = 11);

}  // namespace ddplab::testing
