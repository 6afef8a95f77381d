#include "ddplab/launch/launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/launch/process.h"
#include "ddplab/launch/rank_output.h"
#include "ddplab/launch/worker_env.h"
#include "ddplab/rundir/layout.h"

extern char** environ;

namespace ddplab::launch {
namespace {

using Clock = std::chrono::steady_clock;

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
  const auto& on = o.hosts.rank_hosts;
  if (!on.empty()) {
    const auto host = on[static_cast<size_t>(rank)];
    env.local_rank = static_cast<int>(std::count(on.begin(), on.begin() + rank, host));
    env.local_world_size = static_cast<int>(std::count(on.begin(), on.end(), host));
    env.group_rank = static_cast<int>(std::set<std::string>(on.begin(), on.begin() + rank + 1).size()) - 1;
    env.master_addr = o.hosts.master_addr;
  }
  return env;
}

// The program a rank runs: this binary here, or across hosts `sh -c "<remote> env <contract>
// <binary> worker ..."` (exec'd all the way, so that signals reach the worker or its ssh).
void set_program(const LaunchOptions& o, int rank, int port, SpawnOptions& s) {
  s.argv = {self_executable(), "worker", o.spec_path};
  s.argv.insert(s.argv.end(), o.extra_args.begin(), o.extra_args.end());
  const WorkerEnv env = worker_env_of(o, rank, port);
  if (o.hosts.rank_hosts.empty()) {
    s.program = kSelfExecutableFile;
    s.env = worker_environment(environ, env);
    return;
  }
  std::vector<std::string> command{"env"};
  for (const auto& [name, value] : to_environment(env)) command.push_back(name + "=" + value);
  command.insert(command.end(), s.argv.begin(), s.argv.end());
  s.argv = {"/bin/sh", "-c", "exec " + remote_command(o.hosts.remote, o.hosts.rank_hosts[rank], command)};
}

// Rank `rank` of `<exe> worker <spec>`: stderr (and, but for rank 0, stdout) into its log, or
// with o.tee both into pipes that `output` reads; it ignores Ctrl-C (the launcher stops the ranks
// in order) and dies with a killed launcher.
pid_t spawn_rank(const LaunchOptions& o, int rank, int port, RankOutput& output) {
  SpawnOptions s;
  set_program(o, rank, port, s);
  s.err = Output::kFile;
  s.err_file = rundir::rank_log_file(o.run_dir, rank);
  if (rank != 0) {
    s.out = Output::kFile;
    s.out_file = s.err_file;
  }
  if (o.tee) s.out = s.err = Output::kPipe;
  s.ignore_sigint = true;
  s.parent_death_signal = SIGKILL;
  const Child child = spawn(s);
  if (o.tee) output.add(rank, child.out_fd, child.err_fd, s.err_file);
  return child.pid;
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

std::string tail_file(const std::filesystem::path& file, int lines, const std::string& prefix) {
  std::ifstream in(file);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (auto& l : last) out += fmt::format("{}{}\n", prefix, l);
  return out;
}

namespace {

// The workers of one attempt, from their start until the last has exited.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, int port)
      : o_(o), alive_(o.nproc, true), statuses_(o.nproc, 0), signal_was_ours_(o.nproc, false), running_(o.nproc) {
    for (int r = 0; r < o.nproc; ++r) pids_.push_back(spawn_rank(o, r, port, output_));
  }

  LaunchResult run() {
    while (running_ > 0) {
      if (reap()) continue;
      on_launcher_signal();
      const double grace = interrupted_ ? o_.interrupt_grace_s : o_.grace_s;
      if (stopping_ && !killed_ && std::chrono::duration<double>(Clock::now() - stop_started_).count() > grace) {
        stop_all(SIGKILL);
        killed_ = true;
      }
      if (o_.tee) {
        output_.pump(20);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    output_.drain(2000);
    if (result_.failed_rank >= 0) blame_root_cause();
    return result_;
  }

 private:
  // Handles the exit of every rank that has exited; whether there was one.
  bool reap() {
    bool any = false;
    for (int r = 0; r < o_.nproc; ++r) {
      if (!alive_[r]) continue;
      if (const auto status = try_wait(pids_[r])) {
        on_exit(r, *status);
        any = true;
      }
    }
    return any;
  }

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
    signal_was_ours_[r] =
        WIFSIGNALED(status) && ((stopping_ && WTERMSIG(status) == SIGTERM) || (killed_ && WTERMSIG(status) == SIGKILL));
    const int code = exit_code_of(status);
    const bool ok = code == kExitOk;
    // A clean stop (exit 130/143) is agreed by every rank through the all-reduce, so the others
    // stop after the same step: wait for them, as for a signal sent to the launcher.
    const bool clean_stop =
        WIFEXITED(status) && (code == exit_code_for_signal(SIGINT) || code == exit_code_for_signal(SIGTERM));
    if (clean_stop && !stopping_) {
      result_.exit_code = code;
      result_.reason = fmt::format("rank {} stopped cleanly ({})", r, describe_status(status));
      interrupted_ = true;
      start_stopping();
      return;
    }
    if (ok || stopping_) return;
    const bool diverged = WIFEXITED(status) && code == kExitDiverged;
    result_.exit_code = diverged ? kExitDiverged : kExitFailure;
    result_.failed_rank = diverged ? -1 : r;
    result_.reason = diverged ? read_error_file(o_.run_dir, r).second : describe_status(status);
    start_stopping();
    stop_all(SIGTERM);
  }

  // Workers finish the current step together, then stop; a second signal kills them.
  void on_launcher_signal() {
    const int received = StopSignals::count();
    if (received == signals_seen_) return;
    signals_seen_ = received;
    if (!interrupted_) {
      interrupted_ = true;
      if (!stopping_) {
        result_.exit_code = exit_code_for_signal(StopSignals::last());
        result_.reason = fmt::format("interrupted by {}", signal_name(StopSignals::last()));
        start_stopping();
      }
      stop_all(SIGTERM);
    } else if (!killed_) {
      stop_all(SIGKILL);
      killed_ = true;
    }
  }

  void blame_root_cause() {
    std::vector<RankEnd> ends;
    for (int r = 0; r < o_.nproc; ++r)
      ends.push_back({statuses_[r], signal_was_ours_[r], read_error_file(o_.run_dir, r).first});
    result_.failed_rank = root_cause_rank(ends, result_.failed_rank);
    result_.reason = describe_status(statuses_[result_.failed_rank]);
    const std::string message = read_error_file(o_.run_dir, result_.failed_rank).second;
    if (!message.empty()) result_.reason += fmt::format(": {}", message);
  }

  const LaunchOptions& o_;
  RankOutput output_;  // o_.tee: the ranks' pipes
  std::vector<pid_t> pids_;
  std::vector<bool> alive_;
  std::vector<int> statuses_;
  std::vector<bool> signal_was_ours_;  // killed by a signal the launcher had sent
  int running_;
  LaunchResult result_;
  bool stopping_ = false, killed_ = false, interrupted_ = false;
  int signals_seen_ = 0;  // StopSignals::count() when last handled
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
  StopSignals signals(StopSignals::Second::kRecord);
  return Supervisor(o, port).run();
}

}  // namespace ddplab::launch
