// `ddplab run <spec> [overrides]`: a spec without sweep keys is one run (run_one.h; an existing
// run directory needs --force). A sweep runs every run in turn:
//
//   - a run directory that holds a run of another effective spec (rundir::effective_spec: a swept
//     or unswept key, an override or an edit of the file changed since) stops the sweep before
//     anything runs, naming each such run and its changed keys, unless --force replaces them;
//   - a run whose manifest says done, diverged or collapsed is skipped, unless --force;
//   - an unfinished run (running, failed, interrupted) with a checkpoint is resumed from it;
//   - any other run starts over in a fresh directory;
//   - a failed run is counted and the sweep goes on; an interrupted one (SIGINT/SIGTERM) stops
//     the sweep, which a second `ddplab run` finishes;
//   - at the end a summary line ("ddplab: sweep NAME: 3 done, 1 skipped, 0 failed") and, unless
//     stopped, the experiment's report (report/report.h).
// Runs run in run_order, not in expansion order, so that a change of the machine's load during a
// sweep falls on every arm alike instead of on one end of a swept axis.
// Exit code: the interrupted run's (128 + signal) when stopped, else kExitFailure when a run
// failed, else kExitOk (base/exit_codes.h). Diverged and collapsed runs are not failures of the
// sweep: they are counted in its summary, and the report names them.
//
// --dry-run lists the runs (id and what each changes; "changed" and the changed keys for a
// directory of another spec) and checks each as the run would before training
// (check_before_running); nothing is run or written; exit code kExitUserError when one would be
// refused.
//
// --jobs N, --cores C, --gpus G (PackOptions, scheduler.h) pack the sweep instead: several runs
// at once, each in a child process, within that budget (pack.h). The skip/resume policy, the
// summary and the exit code are the same; a failed run never stops the others.
//
// The policy is the pure functions below (over run statuses and exit codes), so it can be
// tested without running anything; run_sweep does the reading, running and printing.
#pragma once
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddplab/config/sweep.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/scheduler.h"

namespace ddplab::runner {

// Whether the sweep skips a run whose manifest says `status` (nullopt: no run there yet).
bool skips_run(std::optional<rundir::RunStatus> status, bool force);

// How a run that is not skipped starts: from the checkpoint of the unfinished run in its
// directory (`resumable`: rundir::holds_resumable_run), or over in a fresh directory.
enum class RunStart { kResume, kStartOver };
RunStart run_start(bool resumable, bool force);

// How a run that ran counts, from its exit code and the status its manifest has after it.
enum class Tally { kDone, kDiverged, kCollapsed, kFailed, kInterrupted };
Tally tally_of(int exit_code, std::optional<rundir::RunStatus> status);

// Why a failed run failed, for the summary: the exception it ended with, else its manifest's
// message, else "exit code N".
std::string failure_reason(const std::string& exception_message, const std::string& manifest_message, int exit_code);

struct SweepTally {
  size_t runs = 0;  // in the sweep
  size_t done = 0, skipped = 0, diverged = 0, collapsed = 0;
  size_t ran = 0;  // runs started (done, diverged, collapsed, failed, interrupted)
  std::vector<std::pair<std::string, std::string>> failures;  // run id, why
  int stop_code = 0;  // non-zero: an interrupted run stopped the sweep with this exit code

  bool stopped() const { return stop_code != 0; }
  void count_skipped() { ++skipped; }
  // Counts a run that ran and ended as `tally` with `exit_code`; `reason` for a failed run.
  void count(Tally tally, int exit_code, const std::string& run_id, const std::string& reason = "");
};

// The order a sweep runs `runs` (as config::expand_sweep gives them) in, as indices into it.
// An arm is the runs' swept values but the seed. Round k holds the k-th run (seed) of every arm
// that has one; rounds run in turn, and inside each round the arms come in a shuffled order drawn
// from std::mt19937_64 seeded by the round and the experiment's name (Fisher-Yates on the raw
// draws, so every toolchain gives the same order). No swept axis, the seed included, then lines
// up with the time a run started. The packed scheduler breaks its ties in this order too.
std::vector<size_t> run_order(const std::vector<config::SweepRun>& runs);

// The sweep's exit code (see above).
int sweep_exit_code(const SweepTally& tally);

// "ddplab: sweep NAME: 2 done, 1 skipped, 1 failed, 1 diverged, 1 collapsed, stopped after 5 of 6".
std::string sweep_summary(const std::string& name, const SweepTally& tally);

// `ddplab run` of the spec file at `path` with `overrides`; returns the exit code. A packed
// sweep (pack.packed()) runs `ddplab run <run's spec> --run-id <id>` per run (self_executable),
// so it must be called from the ddplab binary.
int run_sweep(const std::string& path, const std::vector<std::string>& overrides, bool force, bool dry_run,
              const PackOptions& pack = {});

// `ddplab run <spec> --run-id ID`: one run of a spec without sweep keys, in the run directory
// <output>/<name>/ID instead of seed=<seed> (what a packed sweep starts for each of its runs).
// ID must be a directory name of [A-Za-z0-9._=,+-] without "..", as sweep run ids are.
int run_with_id(const std::string& path, const std::vector<std::string>& overrides, bool force,
                const std::string& run_id);

// What a run would refuse before training, checked for every run without running any: its data
// (read once per distinct dataset section) and its set-up (train::check_setup: a global batch
// larger than the training set, a model the sync method cannot average, ...). Each problem is
// said on stderr, prefixed with the run id in a sweep; returns kExitUserError if there was one,
// else kExitOk. Used by --dry-run and `ddplab validate`.
int check_before_running(const std::vector<config::SweepRun>& runs);

}  // namespace ddplab::runner
