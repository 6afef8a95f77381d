// What the three ways of running a sweep share (the sequential loop, sweep.cpp; packed, pack.h;
// SLURM, slurm.h): reading a run's directory before and after it runs, refusing runs of another
// spec, the sweep's record of its runs, the progress line's times and the closing report. The
// policy over run statuses and exit codes is sweep.h's.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::runner {

// "m:ss" of `seconds`, rounded.
std::string minutes_seconds(double seconds);
// The time left at the pace so far: `spent_s` / `trained_epochs` x `left_epochs`, as "m:ss";
// "-:--" before any epoch was trained.
std::string eta(double spent_s, double trained_epochs, double left_epochs);
// The epochs `run` has left to train: all of them, or, when it resumes (an unfinished run with a
// checkpoint and no `force`), those after its checkpoint, fractional (a run resumed near its end
// takes seconds; counted as a whole run, it made the ETA of the runs after it that short).
double epochs_to_train(const config::SweepRun& run, bool force);

// A run whose directory holds a run of another effective spec, and what changed ("/epochs: 1 -> 3").
struct ChangedRun {
  std::string run_id;
  std::vector<std::string> changes;
};
// The runs of `runs` whose directories hold runs of other effective specs (rundir::spec_changes).
std::vector<ChangedRun> changed_runs(const std::vector<config::SweepRun>& runs);
// Unless `force`: throws ddplab::Error when changed_runs is not empty, listing each such run with
// its changed keys and the two ways on (--force, or another output or name). Called before
// anything of a sweep is run or written (local, packed and SLURM alike).
void refuse_changed_runs(const std::vector<config::SweepRun>& runs, bool force);

// Writes the sweep's run ids, in order, to rundir::sweep_runs_file (ddplab status lists the runs
// not started yet from it). Throws ddplab::Error naming the directory it cannot write.
void record_sweep_runs(const std::vector<config::SweepRun>& runs);

// "ddplab: runs/NAME holds 41.7 MB": the size of the experiment directory's files, said at a
// sweep's end.
std::string disk_use_line(const config::ExperimentSpec& spec);
// The status a run's manifest has, unless `force` (which never reads it).
std::optional<rundir::RunStatus> status_unless_forced(const config::SweepRun& run, bool force);
// The manifest's status and message after a run; nothing of a manifest that cannot be read.
std::pair<std::optional<rundir::RunStatus>, std::string> manifest_after(const std::filesystem::path& dir);
// The experiment's report (report/report.h) over <output>/<name>; a failure is said, not thrown.
void write_experiment_report(const config::ExperimentSpec& spec);

}  // namespace ddplab::runner
