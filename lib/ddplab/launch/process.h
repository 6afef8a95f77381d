// The one process toolkit of ddplab: start a child (fork/execve), wait for it, and read how it
// ended. The launcher (its ranks), the packed sweep (its runs) and the SLURM submitter (sbatch,
// scontrol) all start processes through spawn(); every waitpid status becomes an exit code
// through exit_code_of(), as a shell reports it (128 + n for a child killed by signal n).
//
// The child does only async-signal-safe work between fork and execve (open, dup2, setpgid,
// prctl, sigaction, execve): LibTorch's thread pools may hold locks at fork time.
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddplab::launch {

// Where one of a child's output streams goes.
enum class Output {
  kInherit,  // this process's stream
  kFile,     // SpawnOptions::*_file, truncated first
  kAppend,   // SpawnOptions::*_file, appended to
  kPipe,     // a pipe whose read end Child holds
};

struct SpawnOptions {
  // argv[0]: a path, or a program name looked up on PATH (in this process, before the fork).
  std::vector<std::string> argv;
  // The file to execute when it is not argv[0] (which the child then sees only as its name);
  // empty: argv[0]. Another process of this very binary uses kSelfExecutableFile.
  std::string program;
  // The child's environment, "NAME=value" each; nullopt: this process's environment.
  std::optional<std::vector<std::string>> env;
  Output out = Output::kInherit;
  Output err = Output::kInherit;
  std::filesystem::path out_file;  // for out = kFile/kAppend
  std::filesystem::path err_file;  // for err = kFile/kAppend; the same path as out_file shares one descriptor
  bool stdin_null = false;         // stdin from /dev/null instead of this process's
  bool own_process_group = false;  // setpgid(0, 0): a Ctrl-C at the terminal reaches only this process
  bool ignore_sigint = false;      // the child ignores SIGINT (until it installs its own handler)
  int parent_death_signal = 0;     // PR_SET_PDEATHSIG: sent to the child when this process dies; 0: none
};

// A started child. The pipe ends are -1 unless that stream is Output::kPipe; the caller closes them.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

// Starts `options.argv`. Throws ddplab::Error naming the program when it is not found on PATH,
// std::runtime_error naming the file when an output file or pipe cannot be opened; a program that cannot be executed
// after the fork exits 127 (as a shell's "command not found").
Child spawn(const SpawnOptions& options);

// The exit code of a waitpid status: the child's own code, or 128 + n when signal n killed it.
int exit_code_of(int wait_status);

// "exited with code 1", "killed by signal 9 (Killed)".
std::string describe_status(int wait_status);

// Reaps `pid` if it has ended (never blocks); its waitpid status, and its resource use in
// `usage` when given (children of the child included once they were reaped).
std::optional<int> try_wait(pid_t pid, struct rusage* usage = nullptr);

// Waits for `pid` to end (EINTR retried); its waitpid status.
int wait_for(pid_t pid);

// A program run to its end with its output captured.
struct ProgramResult {
  int exit_code = 0;  // exit_code_of its status
  std::string out, err;
};

// Runs `argv` (argv[0] looked up on PATH) with stdin from /dev/null and waits for it.
ProgramResult run_program(const std::vector<std::string>& argv);

// The directory of `program` on PATH, if it is there (an executable file).
std::optional<std::filesystem::path> find_on_path(const std::string& program);

// `argv` as one shell command line, each argument that needs it in single quotes.
std::string shell_command(const std::vector<std::string>& argv);

// Path of the running executable (/proc/self/exe resolved), for argv[0] and messages.
std::string self_executable();

// The file to execute (SpawnOptions::program) for another process of this very binary. Linux
// resolves /proc/self/exe at exec time to the running executable's own file, even after its path
// was replaced or deleted (a rebuild or an upgrade during a long sweep), so the workers and runs a
// process starts always run its code. Through self_executable()'s path they would run another
// binary, or, with the file gone, fail to start (exit code 127).
inline constexpr const char* kSelfExecutableFile = "/proc/self/exe";

}  // namespace ddplab::launch
