#include "ddplab/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/launch/worker_env.h"
#include "ddplab/rundir/layout.h"

extern char** environ;

namespace ddplab::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

WorkerEnv worker_env_of(const LaunchOptions& o, int rank, int port) {
  WorkerEnv env;
  env.rank = rank;
  env.world_size = o.nproc;
  env.local_rank = rank;
  env.local_world_size = o.nproc;
  env.group_rank = 0;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.restart_count = o.restart_count;
  env.launcher = true;
  env.run_dir = o.run_dir;
  env.resume = o.resume;
  return env;
}

pid_t spawn(const LaunchOptions& o, int rank, int port) {
  std::vector<std::string> env_strings = worker_environment(environ, worker_env_of(o, rank, port));
  std::vector<std::string> args = {self_executable(), "worker", o.spec_path};
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  std::string log = rundir::rank_log_file(o.run_dir, rank).string();

  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no worker outlives a launcher that was killed
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
      if (rank != 0) ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
    }
    signal(SIGINT, SIG_IGN);  // Ctrl-C reaches the launcher, which stops the ranks in order
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// (time in ns since the epoch, message) of <run_dir>/rank-<r>.error, or (0, "") if absent.
std::pair<int64_t, std::string> read_error_file(const std::filesystem::path& run_dir, int rank) {
  std::ifstream in(rundir::rank_error_file(run_dir, rank));
  int64_t t = 0;
  std::string message;
  if (!(in >> t)) return {0, ""};
  std::getline(in >> std::ws, message);
  return {t, message};
}

}  // namespace

void write_error_file(const std::filesystem::path& run_dir, int rank, const std::string& message) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::ofstream out(rundir::rank_error_file(run_dir, rank));
  std::string one_line = message;
  for (auto& c : one_line)
    if (c == '\n') c = ' ';
  out << fmt::format("{} {}\n", std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), one_line);
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

std::string tail_file(const std::filesystem::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (auto& l : last) out += fmt::format("    {}\n", l);
  return out;
}

SignalScope::SignalScope(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

SignalScope::~SignalScope() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

namespace {

// The workers of one attempt, from their start until the last has exited.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, int port) : o_(o), alive_(o.nproc, true), statuses_(o.nproc, 0),
                                                 signal_was_ours_(o.nproc, false), running_(o.nproc) {
    for (int r = 0; r < o.nproc; ++r) pids_.push_back(spawn(o, r, port));
  }

  LaunchResult run() {
    while (running_ > 0) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        for (int r = 0; r < o_.nproc; ++r)
          if (pids_[r] == pid && alive_[r]) on_exit(r, status);
        continue;
      }
      on_launcher_signal();
      const double grace = interrupted_ ? o_.interrupt_grace_s : o_.grace_s;
      if (stopping_ && !killed_ && std::chrono::duration<double>(Clock::now() - stop_started_).count() > grace) {
        stop_all(SIGKILL);
        killed_ = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (result_.failed_rank >= 0) blame_root_cause();
    return result_;
  }

 private:
  void stop_all(int sig) {
    for (int r = 0; r < o_.nproc; ++r)
      if (alive_[r]) ::kill(pids_[r], sig);
  }

  void start_stopping() {
    stopping_ = true;
    stop_started_ = Clock::now();
  }

  void on_exit(int r, int status) {
    alive_[r] = false;
    --running_;
    statuses_[r] = status;
    signal_was_ours_[r] = WIFSIGNALED(status) && ((stopping_ && WTERMSIG(status) == SIGTERM) ||
                                                  (killed_ && WTERMSIG(status) == SIGKILL));
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == kExitOk;
    // A clean stop (exit 130/143) is agreed by every rank through the all-reduce, so the others
    // stop after the same step: wait for them, as for a signal sent to the launcher.
    const bool clean_stop = WIFEXITED(status) && (WEXITSTATUS(status) == exit_code_for_signal(SIGINT) ||
                                                  WEXITSTATUS(status) == exit_code_for_signal(SIGTERM));
    if (clean_stop && !stopping_) {
      result_.exit_code = WEXITSTATUS(status);
      result_.reason = fmt::format("rank {} stopped cleanly ({})", r, describe(status));
      interrupted_ = true;
      start_stopping();
      return;
    }
    if (ok || stopping_) return;
    const bool diverged = WIFEXITED(status) && WEXITSTATUS(status) == kExitDiverged;
    result_.exit_code = diverged ? kExitDiverged : kExitFailure;
    result_.failed_rank = diverged ? -1 : r;
    result_.reason = diverged ? read_error_file(o_.run_dir, r).second : describe(status);
    start_stopping();
    stop_all(SIGTERM);
  }

  // Workers finish the current step together, then stop; a second signal kills them.
  void on_launcher_signal() {
    if (g_signal != 0 && !interrupted_) {
      interrupted_ = true;
      if (!stopping_) {
        result_.exit_code = exit_code_for_signal(g_signal);
        result_.reason = fmt::format("interrupted by {}", strsignal(g_signal));
        start_stopping();
      }
      g_signal = 0;
      stop_all(SIGTERM);
    } else if (g_signal != 0 && !killed_) {
      stop_all(SIGKILL);
      killed_ = true;
    }
  }

  void blame_root_cause() {
    std::vector<RankEnd> ends;
    for (int r = 0; r < o_.nproc; ++r)
      ends.push_back({statuses_[r], signal_was_ours_[r], read_error_file(o_.run_dir, r).first});
    result_.failed_rank = root_cause_rank(ends, result_.failed_rank);
    result_.reason = describe(statuses_[result_.failed_rank]);
    const std::string message = read_error_file(o_.run_dir, result_.failed_rank).second;
    if (!message.empty()) result_.reason += fmt::format(": {}", message);
  }

  const LaunchOptions& o_;
  std::vector<pid_t> pids_;
  std::vector<bool> alive_;
  std::vector<int> statuses_;
  std::vector<bool> signal_was_ours_;  // killed by a signal the launcher had sent
  int running_;
  LaunchResult result_;
  bool stopping_ = false, killed_ = false, interrupted_ = false;
  Clock::time_point stop_started_ = Clock::now();
};

}  // namespace

int root_cause_rank(const std::vector<RankEnd>& ends, int first_seen) {
  for (size_t r = 0; r < ends.size(); ++r) {
    const int status = ends[r].status;
    if (WIFSIGNALED(status) && !ends[r].signal_was_ours && WTERMSIG(status) != SIGPIPE) return static_cast<int>(r);
  }
  int root = first_seen;
  int64_t earliest = INT64_MAX;
  for (size_t r = 0; r < ends.size(); ++r)
    if (ends[r].error_ns > 0 && ends[r].error_ns < earliest) {
      earliest = ends[r].error_ns;
      root = static_cast<int>(r);
    }
  return root;
}

LaunchResult launch_workers(const LaunchOptions& o) {
  int port = 0;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  auto store = distributed::host_store("127.0.0.1", timeout, &port);
  g_signal = 0;
  SignalScope signals(on_signal);
  return Supervisor(o, port).run();
}

}  // namespace ddplab::launch
