// `ddplab status [dir]`: a table of every run below `dir` (an experiment directory
// <output>/<name>, or one run's directory), from its files and, where a SLURM job is recorded
// (slurm-job.json, runner/slurm.h), from `scontrol show job`:
//
//   RUN                     STATE        EPOCH  TEST ACC  JOB   SLURM
//   replicas.count=1,seed=1 done         1/1    0.7340    1021  COMPLETED
//   replicas.count=2,seed=1 pending      -      -         1022  PENDING (Resources)
//   ddplab: 2 runs: 1 done, 1 pending; report job 1023: PENDING (Dependency)
//
// A run is a directory holding manifest.json or slurm-spec.json (a submitted run that has not
// started); others are searched below. A sweep's runs that have no directory yet are listed too,
// as "pending", from the run ids the sweep recorded as it started (rundir::sweep_runs_file). After
// the summary, one line per failed, interrupted or diverged run: its exit code and the last line
// of its manifest's message. The report job is the experiment directory's slurm-job.json.
// STATE is run_state(); EPOCH the epochs recorded of the spec's; TEST ACC the last record's. SLURM
// says "-" without a job, "unknown" for a job SLURM no longer knows, "?" when scontrol is missing
// or fails (said once on stderr). Exit code kExitOk; an Error when `dir` holds no run.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/rundir/run_log.h"

namespace ddplab::runner {

// A run's state from its manifest's status and its recorded job's SLURM state ("" when there is
// no job or SLURM no longer knows it): the status when the run is finished (done, diverged);
// else, while the job may still run, its state in lower case ("pending", "running"); else the
// status; "not started" without either.
std::string run_state(std::optional<rundir::RunStatus> status, const std::string& job_state);

struct StatusRow {
  std::string run, state, epoch, test_acc, job, slurm;
  // For a run whose manifest says done but whose records show it collapsed or diverged (written
  // before the runner judged that, rundir/health.h): the judgement; `state` then names it.
  std::string judged;
};
// The rows as a table with a header, columns aligned (two spaces between), one line per row.
std::string status_table(const std::vector<StatusRow>& rows);

// `ddplab status`; returns the exit code.
int status_command(const std::string& dir);

}  // namespace ddplab::runner
