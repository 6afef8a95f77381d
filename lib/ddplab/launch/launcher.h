// ddplab's own launcher: starts N worker processes of this binary on this host (or across hosts,
// LaunchOptions::hosts) and supervises them, the way torchrun's local agent does.
//
// Across hosts each rank is started through the hosts' remote command (`ssh {host}`, or the lab's
// `ip netns exec {host}`) with the contract's variables on its command line (`env RANK=...`), the
// store listens on every address of this machine and the workers reach it at hosts.master_addr;
// ranks' output comes back through the remote command as from a local rank.
//
// It hosts the c10d TCPStore on 127.0.0.1 at a free port (so two runs never collide) and starts
// `<exe> worker <spec.json>` N times with the variables of the worker environment contract set
// (RANK, WORLD_SIZE, ..., DDPLAB_RUN_DIR: launch/worker_env.h). Each rank's stderr goes to
// <run_dir>/rank-<r>.log; rank 0's stdout stays on the console, the others' go to their log.
// With `tee` every rank's stdout and stderr go to its log and to the console, each line prefixed
// "[rank <r>] " (rank_output.h).
//
// If a worker exits non-zero or is killed, the others get SIGTERM, then SIGKILL after
// `grace_s`; the launcher names the rank that failed first (see write_error_file) and returns
// kExitFailure (base/exit_codes.h); the caller prints the end of its log. SIGINT or
// SIGTERM to the launcher is passed on to the workers as SIGTERM: they finish the current step
// together and stop (a second signal kills them). A worker exiting with kExitDiverged means the run
// diverged (every rank sees the same NaN); that is not a failure of a rank. No worker outlives it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ddplab/launch/hosts.h"

namespace ddplab::launch {

struct LaunchOptions {
  int nproc = 1;
  std::filesystem::path run_dir;
  std::string spec_path;                // resolved spec the workers read
  std::vector<std::string> extra_args;  // appended to the worker command line
  double grace_s = 5.0;                 // after a rank failed: SIGTERM, then SIGKILL after this
  double interrupt_grace_s = 60.0;      // after SIGINT/SIGTERM: time for the clean stop
  double timeout_s = 300.0;             // store timeout
  bool resume = false;                  // workers continue from the checkpoint (DDPLAB_RESUME=1)
  int restart_count = 0;                // this attempt's number (TORCHELASTIC_RESTART_COUNT for workers)
  bool tee = false;                     // every rank's output on the console too (ddplab run --tee)
  HostPlacement hosts;                  // across hosts (ddplab run --hosts); empty: this host
};

struct LaunchResult {
  // kExitOk: all ranks succeeded; kExitFailure: a rank failed; kExitDiverged; or
  // exit_code_for_signal(SIGINT / SIGTERM): interrupted (base/exit_codes.h).
  int exit_code = 0;
  int failed_rank = -1;
  std::string reason;  // "exited with code 1", "killed by signal 9"
};

LaunchResult launch_workers(const LaunchOptions& options);

// How one rank of a failed attempt ended, as the launcher saw it.
struct RankEnd {
  int status = 0;                // waitpid status
  bool signal_was_ours = false;  // killed by a signal the launcher had sent it (SIGTERM, SIGKILL)
  int64_t error_ns = 0;          // time stamp of its rank-<r>.error, 0 if it wrote none
};

// The rank to blame for a failed attempt. The first exit the launcher reaps is often a peer's
// reaction ("connection closed", or SIGPIPE from a write to the dead peer's socket), and two
// exits in one poll come back in any order, so the order of reaping decides nothing: the root
// cause is the lowest rank killed by a signal nobody here sent (SIGPIPE excepted), else the rank
// with the earliest error file, else `first_seen` (the first rank that failed before the stop).
int root_cause_rank(const std::vector<RankEnd>& ends, int first_seen);

// A worker that fails writes <run_dir>/rank-<r>.error ("<ns since epoch> <message>"), so the
// launcher can tell the root cause from the peers that failed in reaction to it (as torchrun's
// error files do).
void write_error_file(const std::filesystem::path& run_dir, int rank, const std::string& message);

// The last `lines` lines of a text file, each after `prefix` ("" if unreadable).
std::string tail_file(const std::filesystem::path& file, int lines, const std::string& prefix = "    ");

}  // namespace ddplab::launch
