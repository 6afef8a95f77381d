// The run directory's layout: every file name ddplab reads or writes in a run directory, in one
// place (as leveldb's db/filename.h). Nothing else spells these names.
//
//   <output>/<name>/<run-id>/     run_dir(spec) in run_log.h
//     spec.json        the fully resolved spec                       spec_file
//     manifest.json    versions, host, world, start/end, status, exit_code  manifest_file
//     epochs.jsonl     one JSON record per epoch                     epochs_file
//     epochs.csv       the same records as CSV                       epochs_csv_file
//     steps.jsonl      one JSON record per log.every_steps interval  steps_file
//     checkpoint.pt    the latest checkpoint (train/checkpoint.h)    checkpoint_file
//     model.pt         the final model (torch::save of the module)   model_file
//     best.pt          the best epoch's model on validation          best_model_file
//     rank-<r>.log     rank r's stderr; stdout too, but rank 0's (all under --tee)  rank_log_file
//     rank-<r>.error   rank r's last error (written before it exits)   rank_error_file
//     profile-rank-<r>.pt.trace.json  rank r's trace of log.profile_steps steps  profile_trace_file
//     slurm-job.json   the run's SLURM job: id, sbatch command, when   slurm_job_file
//     slurm-job.sh     its batch script (srun ddplab worker ...)      slurm_script_file
//     slurm-spec.json  the spec file that script gives the workers    slurm_spec_file
//     slurm-job.out    the job's output (sbatch --output)             slurm_output_file
//   <output>/<name>/slurm-job.{json,sh,out}: the same of the sweep's report job
// (ddplab run --launcher slurm, runner/slurm.h). The slurm-* files belong to the launcher: a run
// that is replaced (started over) keeps them (is_launcher_file), so a queued job's record and
// inputs survive its own start.
//   <output>/<name>/sweep/         a sweep's own files
//     runs.json        the sweep's run ids in order, written as it starts  sweep_runs_file
//                      (ddplab status lists the runs not started yet from it)
//   and a packed sweep's (runner/pack.h):
//     <run-id>.json    the run's resolved spec its process reads      sweep_spec_file
//     <run-id>.log     that process's console output                  sweep_log_file
#pragma once
#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace ddplab::rundir {

inline std::filesystem::path spec_file(const std::filesystem::path& dir) { return dir / "spec.json"; }
inline std::filesystem::path manifest_file(const std::filesystem::path& dir) { return dir / "manifest.json"; }
inline std::filesystem::path epochs_file(const std::filesystem::path& dir) { return dir / "epochs.jsonl"; }
inline std::filesystem::path epochs_csv_file(const std::filesystem::path& dir) { return dir / "epochs.csv"; }
inline std::filesystem::path steps_file(const std::filesystem::path& dir) { return dir / "steps.jsonl"; }
inline std::filesystem::path checkpoint_file(const std::filesystem::path& dir) { return dir / "checkpoint.pt"; }
inline std::filesystem::path model_file(const std::filesystem::path& dir) { return dir / "model.pt"; }
inline std::filesystem::path best_model_file(const std::filesystem::path& dir) { return dir / "best.pt"; }
inline std::filesystem::path rank_log_file(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("rank-{}.log", rank);
}
inline std::filesystem::path rank_error_file(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("rank-{}.error", rank);
}
// The ".pt.trace.json" ending is what TensorBoard's PyTorch profiler plugin looks for.
inline std::filesystem::path profile_trace_file(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("profile-rank-{}.pt.trace.json", rank);
}
inline std::filesystem::path sweep_dir(const std::filesystem::path& experiment_dir) { return experiment_dir / "sweep"; }
inline std::filesystem::path sweep_runs_file(const std::filesystem::path& experiment_dir) {
  return sweep_dir(experiment_dir) / "runs.json";
}
inline std::filesystem::path sweep_spec_file(const std::filesystem::path& experiment_dir, const std::string& run_id) {
  return sweep_dir(experiment_dir) / fmt::format("{}.json", run_id);
}
inline std::filesystem::path sweep_log_file(const std::filesystem::path& experiment_dir, const std::string& run_id) {
  return sweep_dir(experiment_dir) / fmt::format("{}.log", run_id);
}
inline std::filesystem::path slurm_job_file(const std::filesystem::path& dir) { return dir / "slurm-job.json"; }
inline std::filesystem::path slurm_script_file(const std::filesystem::path& dir) { return dir / "slurm-job.sh"; }
inline std::filesystem::path slurm_spec_file(const std::filesystem::path& dir) { return dir / "slurm-spec.json"; }
inline std::filesystem::path slurm_output_file(const std::filesystem::path& dir) { return dir / "slurm-job.out"; }
// Whether `file` (a path in a run directory) is one of the slurm-* files above.
inline bool is_launcher_file(const std::filesystem::path& file) {
  return file.filename().string().rfind("slurm-", 0) == 0;
}
// `file` with ".tmp" appended: where a file is written before it is renamed over `file`.
inline std::filesystem::path temp_file(const std::filesystem::path& file) {
  return std::filesystem::path(fmt::format("{}.tmp", file.string()));
}

}  // namespace ddplab::rundir
