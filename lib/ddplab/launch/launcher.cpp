#include "ddplab/launch/launcher.h"
#include "ddplab/rundir/layout.h"

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

#include "ddplab/distributed/comm.h"
#include "ddplab/base/error.h"

extern char** environ;

namespace ddplab::launch {
namespace {

constexpr int kExitDiverged = 3;
std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

pid_t spawn(const LaunchOptions& o, int rank, int port) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    static const char* overridden[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                                       "MASTER_PORT=", "DDPLAB_LAUNCHER=", "DDPLAB_RUN_DIR=", "GROUP_RANK=",
                                       "DDPLAB_RESUME=", "TORCHELASTIC_RESTART_COUNT="};
    bool skip = false;
    for (const char* prefix : overridden) skip = skip || kv.rfind(prefix, 0) == 0;
    if (!skip) env_strings.push_back(kv);
  }
  env_strings.push_back("RANK=" + std::to_string(rank));
  env_strings.push_back("WORLD_SIZE=" + std::to_string(o.nproc));
  env_strings.push_back("LOCAL_RANK=" + std::to_string(rank));
  env_strings.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc));
  env_strings.push_back("GROUP_RANK=0");
  env_strings.push_back("MASTER_ADDR=127.0.0.1");
  env_strings.push_back("MASTER_PORT=" + std::to_string(port));
  env_strings.push_back("DDPLAB_LAUNCHER=1");
  env_strings.push_back("DDPLAB_RUN_DIR=" + o.run_dir.string());
  env_strings.push_back(std::string("DDPLAB_RESUME=") + (o.resume ? "1" : "0"));
  env_strings.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(o.restart_count));
  std::vector<std::string> args = {self_executable(), "worker", o.spec_path};
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  std::string log = rundir::rank_log_file(o.run_dir, rank).string();

  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
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
  out << std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() << " " << one_line << "\n";
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
  for (auto& l : last) out += "    " + l + "\n";
  return out;
}

LaunchResult launch_workers(const LaunchOptions& o) {
  int port = 0;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  auto store = distributed::host_store("127.0.0.1", timeout, &port);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_signal = 0;

  std::vector<pid_t> pids;
  for (int r = 0; r < o.nproc; ++r) pids.push_back(spawn(o, r, port));
  std::vector<bool> alive(o.nproc, true);
  std::vector<int> statuses(o.nproc, 0);
  std::vector<bool> failed_on_its_own(o.nproc, false);  // failed before the launcher signalled anyone
  int running = o.nproc;
  LaunchResult result;
  bool stopping = false;
  auto stop_started = std::chrono::steady_clock::now();
  bool killed = false;
  bool interrupted = false;

  auto stop_all = [&](int sig) {
    for (int r = 0; r < o.nproc; ++r)
      if (alive[r]) ::kill(pids[r], sig);
  };

  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < o.nproc; ++r) {
        if (pids[r] != pid || !alive[r]) continue;
        alive[r] = false;
        --running;
        statuses[r] = status;
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        // A clean stop (exit 130/143) is agreed by every rank through the all-reduce, so the
        // others stop after the same step: wait for them, as for a signal sent to the launcher.
        const bool clean_stop = WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT ||
                                                      WEXITSTATUS(status) == 128 + SIGTERM);
        if (clean_stop && !stopping) {
          result.exit_code = WEXITSTATUS(status);
          result.reason = "rank " + std::to_string(r) + " stopped cleanly (" + describe(status) + ")";
          interrupted = true;
          stopping = true;
          stop_started = std::chrono::steady_clock::now();
          continue;
        }
        if (!ok && !stopping) failed_on_its_own[r] = true;
        if (!ok && !stopping) {
          const bool diverged = WIFEXITED(status) && WEXITSTATUS(status) == kExitDiverged;
          result.exit_code = diverged ? kExitDiverged : 1;
          result.failed_rank = diverged ? -1 : r;
          result.reason = diverged ? read_error_file(o.run_dir, r).second : describe(status);
          stopping = true;
          stop_started = std::chrono::steady_clock::now();
          stop_all(SIGTERM);
        }
      }
      continue;
    }
    if (g_signal != 0 && !interrupted) {
      // Workers finish the current step together, then stop; a second signal kills them.
      interrupted = true;
      if (!stopping) {
        result.exit_code = 128 + g_signal;
        result.reason = std::string("interrupted by ") + strsignal(g_signal);
        stopping = true;
        stop_started = std::chrono::steady_clock::now();
      }
      g_signal = 0;
      stop_all(SIGTERM);
    } else if (g_signal != 0 && !killed) {
      stop_all(SIGKILL);
      killed = true;
    }
    const double grace = interrupted ? o.interrupt_grace_s : o.grace_s;
    if (stopping && !killed &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_started).count() > grace) {
      stop_all(SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (result.failed_rank >= 0) {
    // The first exit the launcher saw is often a peer's "connection closed" reaction. The root
    // cause is a rank killed by a signal nobody here sent, else the earliest error a rank wrote.
    int root = -1;
    for (int r = 0; r < o.nproc && root < 0; ++r)
      if (failed_on_its_own[r] && WIFSIGNALED(statuses[r])) root = r;
    int64_t earliest = INT64_MAX;
    std::string message;
    for (int r = 0; r < o.nproc && root < 0; ++r) {
      auto error = read_error_file(o.run_dir, r);
      if (error.first > 0 && error.first < earliest) {
        earliest = error.first;
        result.failed_rank = r;
        message = error.second;
      }
    }
    if (root >= 0) result.failed_rank = root;
    result.reason = describe(statuses[result.failed_rank]);
    if (!message.empty()) result.reason += ": " + message;
  }
  return result;
}

}  // namespace ddplab::launch
