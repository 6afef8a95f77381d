#include "ddplab/launch/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"

extern char** environ;

namespace fs = std::filesystem;

namespace ddplab::launch {
namespace {

// A descriptor closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(-1); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// One output stream of the child: the descriptor it gets as 1 or 2, and the parent's read end.
struct Stream {
  Fd child_end;
  Fd parent_end;
};

Stream open_stream(Output kind, const fs::path& file, const std::string& program) {
  Stream s;
  if (kind == Output::kInherit) return s;
  if (kind == Output::kPipe) {
    std::array<int, 2> p{-1, -1};
    if (::pipe2(p.data(), O_CLOEXEC) != 0)
      throw std::runtime_error(fmt::format("cannot run {}: pipe: {}", program, std::strerror(errno)));
    s.parent_end.reset(p[0]);
    s.child_end.reset(p[1]);
    return s;
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (kind == Output::kAppend ? O_APPEND : O_TRUNC);
  const int fd = ::open(file.c_str(), flags, 0644);
  if (fd < 0)
    throw std::runtime_error(
        fmt::format("cannot run {}: cannot open {}: {}", program, file.string(), std::strerror(errno)));
  s.child_end.reset(fd);
  return s;
}

std::string resolved_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const auto dir = find_on_path(program);
  if (!dir) {
    const char* path = std::getenv("PATH");
    throw Error(fmt::format("cannot run {}: not found on PATH ({})", program, path == nullptr ? "unset" : path));
  }
  return (*dir / program).string();
}

// Between fork and execve: async-signal-safe calls only.
[[noreturn]] void become(const SpawnOptions& o, const char* program, char* const* argv, char* const* envp, int out,
                         int err, int in, pid_t parent) {
  if (o.own_process_group) ::setpgid(0, 0);
  if (o.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  if (o.ignore_sigint) {
    struct sigaction sa{};
    sa.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, &sa, nullptr);
  }
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  if (out >= 0) ::dup2(out, STDOUT_FILENO);
  if (err >= 0) ::dup2(err, STDERR_FILENO);
  ::execve(program, argv, envp);
  ::_exit(127);
}

}  // namespace

Child spawn(const SpawnOptions& o) {
  TORCH_INTERNAL_ASSERT(!o.argv.empty(), "spawn needs a program");
  const std::string program = o.program.empty() ? resolved_program(o.argv.front()) : o.program;
  Stream out = open_stream(o.out, o.out_file, o.argv.front());
  const bool shared = o.err != Output::kPipe && o.err == o.out && o.err_file == o.out_file;
  Stream err = shared ? Stream{} : open_stream(o.err, o.err_file, o.argv.front());
  Fd in(o.stdin_null ? ::open("/dev/null", O_RDONLY | O_CLOEXEC) : -1);

  std::vector<std::string> env_strings;
  if (o.env) env_strings = *o.env;
  std::vector<char*> argv, envp;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* const* env = o.env ? envp.data() : environ;
  const int err_fd = shared ? out.child_end.get() : err.child_end.get();

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("cannot run {}: fork: {}", o.argv.front(), std::strerror(errno)));
  if (pid == 0) become(o, program.c_str(), argv.data(), env, out.child_end.get(), err_fd, in.get(), parent);
  if (o.own_process_group) ::setpgid(pid, pid);  // also here, so a signal sent right after the fork finds the group
  return Child{pid, out.parent_end.release(), err.parent_end.release()};
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return exit_code_for_signal(WTERMSIG(wait_status));
  return kExitFailure;
}

std::string describe_status(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)));
  return "stopped";
}

std::optional<int> try_wait(pid_t pid, struct rusage* usage) {
  int status = 0;
  struct rusage ignored{};
  pid_t r = 0;
  do {
    r = ::wait4(pid, &status, WNOHANG, usage != nullptr ? usage : &ignored);
  } while (r < 0 && errno == EINTR);
  if (r == pid) return status;
  return std::nullopt;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

namespace {

// Reads the child's stdout and stderr pipes to their ends into `out`, `err`.
void drain(std::array<int, 2> fds, std::string& out, std::string& err) {
  std::array<pollfd, 2> p{{{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}}};
  std::array<char, 4096> buf{};
  int open = 2;
  while (open > 0) {
    if (::poll(p.data(), p.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      const ssize_t n = ::read(p[i].fd, buf.data(), buf.size());
      if (n > 0) {
        (i == 0 ? out : err).append(buf.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(p[i].fd);
        p[i].fd = -1;
        --open;
      }
    }
  }
}

}  // namespace

ProgramResult run_program(const std::vector<std::string>& argv) {
  SpawnOptions o;
  o.argv = argv;
  o.out = o.err = Output::kPipe;
  o.stdin_null = true;
  const Child child = spawn(o);
  ProgramResult r;
  drain({child.out_fd, child.err_fd}, r.out, r.err);
  r.exit_code = exit_code_of(wait_for(child.pid));
  return r;
}

std::optional<fs::path> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path == nullptr ? "" : path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path dir = end > start ? fs::path(dirs.substr(start, end - start)) : fs::path(".");
    std::error_code ec;
    if (fs::is_regular_file(dir / program, ec) && ::access((dir / program).c_str(), X_OK) == 0) return dir;
    start = end + 1;
  }
  return std::nullopt;
}

std::string self_executable() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  return std::string(buf.data(), static_cast<size_t>(n));
}

std::string shell_command(const std::vector<std::string>& argv) {
  static const std::regex plain("[A-Za-z0-9_@%+=:,./-]+");
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    if (std::regex_match(arg, plain)) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace ddplab::launch
