// `ddplab run <spec> --launcher slurm`: every unfinished run of the sweep (or the one run of a
// spec without sweep keys) becomes one SLURM batch job, then one report job runs `ddplab report`
// on the experiment once they have all ended (--dependency=afterany:<their ids>).
//
// A run's job asks for one task per replica: `--ntasks=<replicas.count> --cpus-per-task=<threads>`,
// plus `--gpus-per-task=1` for cuda. Its batch script (<run dir>/slurm-job.sh) runs
// `srun ddplab worker <run dir>/slurm-spec.json --run-id <run id>`: the workers find their world
// in SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST and SLURM_JOB_ID (distributed/world.h), rank 0
// makes or continues the run directory (runner/worker.h) with DDPLAB_RESUME=1, so a run that
// stopped with a checkpoint (scancel, a time limit, a requeue) continues from it; with --force
// DDPLAB_FORCE=1 instead, which starts every run over. The job's output goes to
// <run dir>/slurm-job.out; its id, command and submission time to <run dir>/slurm-job.json
// (rundir/layout.h), which `ddplab status` reads. The report job's files are the same names in
// <output>/<name>/. The partition, time limit, account and more sbatch options come from the
// spec's "slurm" section (config/slurm.h), each run's own, overridden by the command line.
//
// Which runs are submitted (slurm_action): not one whose recorded job SLURM still runs or queues
// (scontrol show job: is_active_job_state), whatever --force says; not one whose manifest says
// done or diverged, unless --force (as the local sweep, runner/sweep.h skips_run); every other
// run is. Running the same command again thus submits only what is neither finished nor queued.
//
// --dry-run prints each sbatch command and the srun line of its script, and the report job's,
// and submits and writes nothing. Errors (ddplab::Error, exit code 2): no sbatch or scontrol on
// PATH (before anything is written); sbatch refusing a job (its exit code and stderr, the run, and
// how many jobs were submitted before it, whose records are kept); a simulated run (one process:
// `ddplab run` it). Only slurm-* files are written into run directories, never a run's own.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/config/slurm.h"
#include "ddplab/config/spec.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::runner {

// What `ddplab run --launcher slurm` was asked.
struct SlurmRequest {
  config::SlurmOptions options;  // the command line's; they override each run's spec section
  bool force = false;            // --force: submit finished runs too, and start every run over
  bool dry_run = false;          // --dry-run: print the sbatch commands, submit and write nothing
};

// Whether a job SLURM reports in `state` (scontrol's JobState) may still run: PENDING, RUNNING,
// SUSPENDED, COMPLETING, CONFIGURING, REQUEUED and the like. COMPLETED, FAILED, CANCELLED,
// TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE and "" (a job SLURM no longer
// knows) may not.
bool is_active_job_state(const std::string& state);

// What the submission does with a run whose manifest says `status` (nullopt: none yet) and whose
// recorded job is (`job_active`) or is not queued or running.
enum class SlurmAction { kSubmit, kSkipFinished, kSkipQueued };
SlurmAction slurm_action(std::optional<rundir::RunStatus> status, bool job_active, bool force);

// The batch script of `run`: srun of `ddplab` (the binary) worker on `spec_file`.
std::string run_batch_script(const config::ExperimentSpec& run, const std::filesystem::path& ddplab,
                             const std::filesystem::path& spec_file, bool force);
// The sbatch command (argv, "sbatch" first) that submits the script of `run` in its run directory
// `dir` (absolute) with `options`:
//   sbatch --parsable --job-name=<name>/<run id> --output=<dir>/slurm-job.out --open-mode=append
//          --ntasks=<count> --cpus-per-task=<threads> [--gpus-per-task=1] [--partition=P]
//          [--time=T] [--account=A] [options...] <dir>/slurm-job.sh
std::vector<std::string> run_sbatch_command(const config::ExperimentSpec& run, const config::SlurmOptions& options,
                                            const std::filesystem::path& dir);

// The report job's script, and its sbatch command: one task, one CPU, after every job of
// `job_ids` has ended (--dependency=afterany:<id>:<id>...; `job_ids` not empty), its files in the
// experiment directory `experiment_dir` (absolute).
std::string report_batch_script(const std::filesystem::path& ddplab, const std::filesystem::path& experiment_dir);
std::vector<std::string> report_sbatch_command(const std::string& name, const config::SlurmOptions& options,
                                               const std::filesystem::path& experiment_dir,
                                               const std::vector<std::string>& job_ids);

// The job id in what `sbatch --parsable` printed: its last line, "<id>" or "<id>;<cluster>"
// (warnings may come before it); nullopt when there is none.
std::optional<std::string> parsable_job_id(const std::string& out);

// What SLURM says of job `id` (`scontrol -o show job <id>`): its JobState ("" when SLURM no
// longer knows the job) and Reason ("None", "Priority", "Dependency", ...). An Error when there
// is no scontrol on PATH or it fails otherwise (the controller does not answer), naming it.
struct JobInfo {
  std::string state;
  std::string reason;
};
JobInfo query_job(const std::string& id);

// The job id recorded in `file` (slurm-job.json, layout.h); nullopt when there is none. An
// Error naming the file when it is not what ddplab writes.
std::optional<std::string> recorded_job_id(const std::filesystem::path& file);

// `ddplab run` of the spec file at `path` with `overrides` under SLURM; returns the exit code.
int submit_sweep(const std::string& path, const std::vector<std::string>& overrides, const SlurmRequest& request);

}  // namespace ddplab::runner
