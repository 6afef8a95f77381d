#include "ddplab/runner/slurm.h"

#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/config/sweep.h"
#include "ddplab/data/dataset.h"
#include "ddplab/launch/process.h"
#include "ddplab/launch/worker_env.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/sweep.h"
#include "ddplab/runner/sweep_steps.h"
#include "ddplab/train/options.h"

namespace fs = std::filesystem;

namespace ddplab::runner {

using rundir::RunStatus;

bool is_active_job_state(const std::string& state) {
  static const std::set<std::string> ended{
      "",          "COMPLETED", "FAILED",        "CANCELLED", "TIMEOUT",      "NODE_FAIL",
      "PREEMPTED", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE",  "SPECIAL_EXIT", "REVOKED"};
  return ended.count(state) == 0;
}

SlurmAction slurm_action(std::optional<RunStatus> status, bool job_active, bool force) {
  if (job_active) return SlurmAction::kSkipQueued;
  return skips_run(status, force) ? SlurmAction::kSkipFinished : SlurmAction::kSubmit;
}

namespace {

// Variables a launcher around `ddplab run` may have set (an outer torchrun, ddplab's own
// launcher): they take precedence over SLURM's in world discovery, so a job's script clears them.
// The worker contract's (launch/worker_env.h) and the two of torchrun's that ddplab never writes.
std::string foreign_world() {
  return fmt::format("{} TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE", fmt::join(launch::worker_env_names(), " "));
}

void add_options(std::vector<std::string>& argv, const config::SlurmOptions& o) {
  if (!o.partition.empty()) argv.push_back(fmt::format("--partition={}", o.partition));
  if (!o.time.empty()) argv.push_back(fmt::format("--time={}", o.time));
  if (!o.account.empty()) argv.push_back(fmt::format("--account={}", o.account));
  argv.insert(argv.end(), o.options.begin(), o.options.end());
}

// The srun line of a run's batch script.
std::vector<std::string> srun_command(const config::ExperimentSpec& run, const fs::path& ddplab,
                                      const fs::path& spec_file) {
  std::vector<std::string> argv{"srun", fmt::format("--ntasks={}", run.replicas.count),
                                fmt::format("--cpus-per-task={}", run.replicas.threads), "--kill-on-bad-exit=1"};
  // Every task of a node sees all of the job's GPUs there and takes GPU LOCAL_RANK (train/network.h).
  if (run.replicas.device == config::Device::kCuda) argv.emplace_back("--gpu-bind=none");
  argv.insert(argv.end(), {ddplab.string(), "worker", spec_file.string(), "--run-id", rundir::run_id(run)});
  return argv;
}

}  // namespace

std::string run_batch_script(const config::ExperimentSpec& run, const fs::path& ddplab, const fs::path& spec_file,
                             bool force) {
  return fmt::format(
      "#!/bin/sh\n"
      "# Written by `ddplab run --launcher slurm`: run {} of experiment {} (its record: slurm-job.json).\n"
      "unset {}\n"
      "export {}=1\n"
      "exec {}\n",
      rundir::run_id(run), run.name, foreign_world(), force ? "DDPLAB_FORCE" : "DDPLAB_RESUME",
      launch::shell_command(srun_command(run, ddplab, spec_file)));
}

std::vector<std::string> run_sbatch_command(const config::ExperimentSpec& run, const config::SlurmOptions& options,
                                            const fs::path& dir) {
  std::vector<std::string> argv{"sbatch",
                                "--parsable",
                                fmt::format("--job-name={}/{}", run.name, rundir::run_id(run)),
                                fmt::format("--output={}", rundir::slurm_output_file(dir).string()),
                                "--open-mode=append",
                                fmt::format("--ntasks={}", run.replicas.count),
                                fmt::format("--cpus-per-task={}", run.replicas.threads)};
  if (run.replicas.device == config::Device::kCuda) argv.emplace_back("--gpus-per-task=1");
  add_options(argv, options);
  argv.push_back(rundir::slurm_script_file(dir).string());
  return argv;
}

std::string report_batch_script(const fs::path& ddplab, const fs::path& experiment_dir) {
  return fmt::format(
      "#!/bin/sh\n"
      "# Written by `ddplab run --launcher slurm`: the report of {}, once its runs' jobs have ended.\n"
      "exec {}\n",
      experiment_dir.filename().string(), launch::shell_command({ddplab.string(), "report", experiment_dir.string()}));
}

std::vector<std::string> report_sbatch_command(const std::string& name, const config::SlurmOptions& options,
                                               const fs::path& experiment_dir,
                                               const std::vector<std::string>& job_ids) {
  TORCH_INTERNAL_ASSERT(!job_ids.empty(), "a report job depends on at least one job");
  std::vector<std::string> argv{"sbatch",
                                "--parsable",
                                fmt::format("--job-name={}/report", name),
                                fmt::format("--output={}", rundir::slurm_output_file(experiment_dir).string()),
                                "--open-mode=append",
                                "--ntasks=1",
                                "--cpus-per-task=1",
                                fmt::format("--dependency=afterany:{}", fmt::join(job_ids, ":"))};
  add_options(argv, options);
  argv.push_back(rundir::slurm_script_file(experiment_dir).string());
  return argv;
}

std::optional<std::string> parsable_job_id(const std::string& out) {
  static const std::regex last_line("(?:^|\\n)(\\d+)(?:;[^\\s;]+)?\\s*$");
  std::smatch m;
  if (!std::regex_search(out, m, last_line)) return std::nullopt;
  return m[1].str();
}

namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "no sbatch on PATH" as the Error a user can act on.
void need_on_path(const std::string& program) {
  if (launch::find_on_path(program)) return;
  const char* path = std::getenv("PATH");
  throw Error(
      fmt::format("--launcher slurm: no `{}` on PATH ({}); run on a host with SLURM's client commands "
                  "(a login node), or add their directory to PATH",
                  program, path == nullptr ? "unset" : path));
}

}  // namespace

JobInfo query_job(const std::string& id) {
  need_on_path("scontrol");
  const auto r = launch::run_program({"scontrol", "-o", "show", "job", id});
  if (r.exit_code != 0) {
    if (r.err.find("Invalid job id") != std::string::npos) return {};
    throw Error(fmt::format("`scontrol show job {}` exited with {}: {}", id, r.exit_code, trimmed(r.err + r.out)));
  }
  std::smatch m;
  JobInfo info;
  if (std::regex_search(r.out, m, std::regex("JobState=(\\S+)"))) info.state = m[1].str();
  if (std::regex_search(r.out, m, std::regex("Reason=(\\S+)"))) info.reason = m[1].str();
  return info;
}

std::optional<std::string> recorded_job_id(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  const auto j = rundir::read_json(file);
  if (!j.is_object() || !j.contains("job_id") || !j["job_id"].is_string() || j["job_id"].get<std::string>().empty())
    throw Error(
        fmt::format("{}: expected an object with a \"job_id\" string (written by ddplab run --launcher "
                    "slurm), got {}",
                    file.string(), j.dump()));
  return j["job_id"].get<std::string>();
}

namespace {

// One run of the sweep and what the submission does with it.
struct Planned {
  const config::SweepRun* run = nullptr;
  fs::path dir;                  // its run directory, absolute
  config::SlurmOptions options;  // its spec's, overridden by the command line's
  std::string job_id;            // the recorded job ("": none)
  std::string job_state;         // what SLURM says of it ("": unknown to SLURM)
  SlurmAction action = SlurmAction::kSubmit;
};

Planned plan(const config::SweepRun& run, const SlurmRequest& request) {
  Planned p;
  p.run = &run;
  p.dir = fs::absolute(rundir::run_dir(run.spec));
  p.options = config::merged(config::slurm_options(run.spec.resolved), request.options);
  if (auto id = recorded_job_id(rundir::slurm_job_file(p.dir))) {
    p.job_id = *id;
    p.job_state = query_job(*id).state;
  }
  // As the local sweep: --force never reads the manifest.
  const auto status = request.force ? std::nullopt : rundir::read_status(p.dir);
  p.action = slurm_action(status, !p.job_id.empty() && is_active_job_state(p.job_state), request.force);
  return p;
}

fs::path ddplab_binary() { return fs::read_symlink("/proc/self/exe"); }

// Runs `argv` (an sbatch command) and returns the job id; an Error naming `what` otherwise.
std::string sbatch(const std::vector<std::string>& argv, const std::string& what, size_t submitted_before) {
  const auto r = launch::run_program(argv);
  const auto id = r.exit_code == 0 ? parsable_job_id(r.out) : std::nullopt;
  if (id) return *id;
  throw Error(fmt::format(
      "{}: sbatch {} (exit code {}): {}; expected a job id from `{}`{}", what,
      r.exit_code == 0 ? "printed no job id" : "refused the job", r.exit_code,
      trimmed(r.err + (r.exit_code == 0 ? r.out : "")), launch::shell_command(argv),
      submitted_before == 0
          ? std::string(" (no job was submitted)")
          : fmt::format(" ({} job{} submitted before it {} recorded in {} run director{}; run the "
                        "same command again to submit the rest)",
                        submitted_before, submitted_before == 1 ? "" : "s", submitted_before == 1 ? "is" : "are",
                        submitted_before == 1 ? "its" : "their", submitted_before == 1 ? "y" : "ies")));
}

void record_job(const fs::path& dir, const std::string& id, const std::vector<std::string>& argv) {
  const nlohmann::json record = {{"job_id", id}, {"submitted", rundir::utc_now()}, {"command", argv}};
  rundir::write_file_atomic(rundir::slurm_job_file(dir), fmt::format("{}\n", record.dump(2)));
}

// Writes the run's spec file and batch script, submits it and records its job; the job id.
std::string submit_run(const Planned& p, const fs::path& ddplab, bool force, size_t submitted_before) {
  std::error_code ec;
  fs::create_directories(p.dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the run directory: {}", p.dir.string(), ec.message()));
  rundir::write_file_atomic(rundir::slurm_spec_file(p.dir), fmt::format("{}\n", p.run->spec.resolved.dump(2)));
  rundir::write_file_atomic(rundir::slurm_script_file(p.dir),
                            run_batch_script(p.run->spec, ddplab, rundir::slurm_spec_file(p.dir), force));
  const auto argv = run_sbatch_command(p.run->spec, p.options, p.dir);
  const std::string id = sbatch(argv, fmt::format("run {}", p.run->run_id), submitted_before);
  record_job(p.dir, id, argv);
  return id;
}

std::string skip_note(const Planned& p) {
  if (p.action == SlurmAction::kSkipQueued) return fmt::format("job {} is {}", p.job_id, p.job_state);
  return rundir::name(*rundir::read_status(p.dir));
}

// --dry-run: the commands, nothing submitted or written.
void print_dry_run(const std::vector<Planned>& plans, const fs::path& ddplab) {
  const size_t n = plans.size();
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const Planned& p = plans[i];
    if (p.action != SlurmAction::kSubmit) {
      any = any || p.action == SlurmAction::kSkipQueued;
      say("[{}/{}] skipping {}: {}", i + 1, n, p.run->run_id, skip_note(p));
      continue;
    }
    any = true;
    say("[{}/{}] {}\n    {}\n    script: {}", i + 1, n, p.run->run_id,
        launch::shell_command(run_sbatch_command(p.run->spec, p.options, p.dir)),
        launch::shell_command(srun_command(p.run->spec, ddplab, rundir::slurm_spec_file(p.dir))));
  }
  if (!any) return;
  const fs::path experiment = plans.front().dir.parent_path();
  say("report\n    {}\n    script: {}",
      launch::shell_command(
          report_sbatch_command(plans.front().run->spec.name, plans.front().options, experiment, {"<the jobs above>"})),
      launch::shell_command({ddplab.string(), "report", experiment.string()}));
}

void check_runs(const std::vector<Planned>& plans) {
  std::set<std::pair<std::string, std::string>> checked;
  for (const auto& p : plans) {
    const auto& spec = p.run->spec;
    if (p.action != SlurmAction::kSubmit) continue;
    if (spec.replicas.mode == config::ReplicaMode::kSimulated)
      throw Error(fmt::format("run {}: {}", p.run->run_id,
                              config::spec_error("/replicas/mode",
                                                 "\"simulated\" replicas run in one process, but --launcher slurm "
                                                 "starts one task per replica; run it with `ddplab run`, or use "
                                                 "replicas.mode \"processes\"")
                                  .what()));
    if (checked.insert({config::name(spec.dataset.name), spec.dataset.root}).second)
      data::check_dataset_files(train::dataset_options(spec.dataset));
  }
}

// Submits the runs to submit, then the report job after them and the still queued ones.
int submit_all(const std::vector<Planned>& plans, const fs::path& ddplab, const SlurmRequest& request) {
  const size_t n = plans.size();
  std::vector<std::string> ids;
  size_t submitted = 0;
  for (size_t i = 0; i < n; ++i) {
    const Planned& p = plans[i];
    if (p.action != SlurmAction::kSubmit) {
      say("[{}/{}] skipping {}: {}", i + 1, n, p.run->run_id, skip_note(p));
      if (p.action == SlurmAction::kSkipQueued) ids.push_back(p.job_id);  // the report waits for it too
      continue;
    }
    ids.push_back(submit_run(p, ddplab, request.force, submitted));
    ++submitted;
    say("[{}/{}] {}: submitted job {}", i + 1, n, p.run->run_id, ids.back());
  }
  const std::string& name = plans.front().run->spec.name;
  const fs::path experiment = plans.front().dir.parent_path();
  if (ids.empty()) {
    say("ddplab: sweep {}: nothing to submit, every run is finished ({} runs)", name, n);
    return kExitOk;
  }
  rundir::write_file_atomic(rundir::slurm_script_file(experiment), report_batch_script(ddplab, experiment));
  const auto argv = report_sbatch_command(name, plans.front().options, experiment, ids);
  const std::string report = sbatch(argv, fmt::format("the report job of {}", name), submitted);
  record_job(experiment, report, argv);
  say("ddplab: sweep {}: submitted {} job{}, {} already queued or running; report job {} after them "
      "(ddplab status {})",
      name, submitted, submitted == 1 ? "" : "s", ids.size() - submitted, report, experiment.string());
  return kExitOk;
}

}  // namespace

int submit_sweep(const std::string& path, const std::vector<std::string>& overrides, const SlurmRequest& request) {
  const auto runs = config::load_sweep(path, overrides).runs;
  config::check_slurm_options(request.options, config::SlurmNames::kCommandLine);
  if (!request.dry_run) {
    need_on_path("sbatch");
    need_on_path("scontrol");
  }
  if (!request.dry_run) {
    refuse_changed_runs(runs, request.force);
    record_sweep_runs(runs);
  }
  std::vector<Planned> plans;
  for (const auto& run : runs) plans.push_back(plan(run, request));
  size_t to_submit = 0, queued = 0;
  for (const auto& p : plans) {
    to_submit += p.action == SlurmAction::kSubmit ? 1 : 0;
    queued += p.action == SlurmAction::kSkipQueued ? 1 : 0;
  }
  check_runs(plans);
  say("ddplab: sweep {}: {} run{}, {} finished, {} queued or running, {} to submit{}", runs.front().spec.name,
      runs.size(), runs.size() == 1 ? "" : "s", runs.size() - to_submit - queued, queued, to_submit,
      request.dry_run ? " (dry run: nothing is submitted or written)" : "");
  const fs::path ddplab = ddplab_binary();
  if (request.dry_run) {
    print_dry_run(plans, ddplab);
    return kExitOk;
  }
  return submit_all(plans, ddplab, request);
}

}  // namespace ddplab::runner
