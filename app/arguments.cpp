#include "arguments.h"

#include <map>

#include "ddplab/config/defaults.h"

namespace ddplab::app {
namespace {

// `ddplab run`'s SLURM options (runner/slurm.h); they need --launcher slurm.
void add_slurm_options(CLI::App* run, Arguments& a) {
  const std::map<std::string, Arguments::Launcher> launchers{{"local", Arguments::Launcher::kLocal},
                                                             {"slurm", Arguments::Launcher::kSlurm}};
  run->add_option("--launcher", a.launcher,
                  "local (default): run here; slurm: submit each unfinished run as a batch job")
      ->transform(CLI::CheckedTransformer(launchers, CLI::ignore_case));
  run->add_option("--partition", a.slurm.partition, "SLURM partition (overrides the spec's slurm.partition)");
  run->add_option("--time", a.slurm.time, "SLURM time limit per run, e.g. 90, 2:00:00, 1-12 (overrides slurm.time)");
  run->add_option("--account", a.slurm.account, "SLURM account (overrides slurm.account)");
  run->add_option("--sbatch-option", a.slurm.options,
                  "One more sbatch argument, e.g. --sbatch-option=--qos=high (repeatable; after slurm.options)");
}

// `ddplab run`'s options for packing a sweep's runs onto this machine (runner/scheduler.h).
void add_pack_options(CLI::App* run, Arguments& a) {
  run->add_option("--jobs", a.pack.jobs, "Pack a sweep: at most N runs at once, each its own process")
      ->check(CLI::Range(1, 4096));
  run->add_option("--cores", a.pack.cores,
                  "Pack a sweep into C cores (a CPU run takes replicas.count x threads; default: all cores)")
      ->check(CLI::Range(1, 4096));
  run->add_option("--gpus", a.pack.gpus,
                  "Pack a sweep onto G GPUs (a CUDA run takes replicas.count; default: the visible GPUs)")
      ->check(CLI::Range(0, 4096));
  run->add_option("--run-id", a.run_id, "Run directory name of a spec without sweep keys (default seed=<seed>)");
}

// `ddplab export tensorboard`: lib/ddplab/tensorboard/export.h.
CLI::App* add_export_command(CLI::App& app, Arguments& a) {
  CLI::App* exp = app.add_subcommand("export", "Write runs in another tool's format (tensorboard)");
  exp->require_subcommand(1);
  CLI::App* tb = exp->add_subcommand(
      "tensorboard",
      "TensorBoard event files with HParams, one per run, under OUT/<experiment>/<run_id>/; the x axis is samples "
      "seen (docs/tensorboard.md). The runs are only read");
  tb->add_option("dirs", a.export_dirs, "Run or experiment directories (searched recursively)")->required();
  tb->add_option("--out", a.export_out, "Where to write (then: tensorboard --logdir OUT); not inside a run")
      ->required();
  return tb;
}

// `ddplab plan`: lib/ddplab/runner/plan_command.h.
CLI::App* add_plan_command(CLI::App& app, Arguments& a) {
  CLI::App* plan = app.add_subcommand(
      "plan",
      "Predict time to target over a grid of replicas x global batch from a short calibration, or score a plan "
      "(--check) on runs done after it (docs/planner.md)");
  plan->add_option("inputs", a.plan.inputs, "SPEC to calibrate from; with --check: the run directories to score on");
  plan->add_option("--grid", a.plan.grid, "replicas=1,2,4 batch=64,128,... (global batches)")->expected(1, -1);
  plan->add_option("--calibration", a.plan.calibration,
                   "Plan from these run directories instead of running a calibration")
      ->expected(1, -1);
  plan->add_option("--check", a.plan.check, "Score this plan.json on the run directories given");
  plan->add_option("--out", a.plan.out, "Where plan.json/plan.md (or check.json/check.md) go");
  plan->add_option("--target-loss", a.plan.target_loss, "Target training loss (from step records; report.target_loss)");
  plan->add_option("--target-acc", a.plan.target_acc, "Target accuracy in (0, 1] (at epoch ends; report.target_acc)");
  plan->add_flag("--probe", a.plan.probe,
                 "With --calibration: measure all-reduce bandwidth and latency (probe.json in the first directory) "
                 "when no calibration directory has them");
  return plan;
}

}  // namespace

Commands add_commands(CLI::App& app, Arguments& a) {
  Commands c{};
  c.run = app.add_subcommand("run", "Run an experiment spec (N replicas are launched as N processes)");
  c.run->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.run->add_option("overrides", a.overrides, "Overrides key.path=value (value parsed as JSON, else a string)");
  c.run->add_flag("--force", a.force, "Replace existing run directories (a sweep reruns its done runs)");
  c.run->add_flag("--dry-run", a.dry_run,
                  "List the runs (ids and what each changes), check their data files and exit; nothing is written "
                  "(with --launcher slurm: print the sbatch commands, submit nothing)");
  c.run->add_flag("--tee", a.tee,
                  "Every rank's stdout and stderr on the console too, each line prefixed [rank r] (they still go to "
                  "the ranks' logs); without it, only a failed rank's last lines are shown");
  c.run->add_option("--hosts", a.hosts.hostfile,
                    "Start the ranks of multi-process runs on the hosts of this file (\"host slots=N\" a line, ranks "
                    "fill them in order; docs/multi-node.md)");
  c.run->add_option("--remote", a.hosts.remote,
                    "With --hosts: the command that runs a command on a host, {host} replaced (default: ssh {host})");
  c.run->add_option("--master-addr", a.hosts.master_addr,
                    "With --hosts: this machine's address as the hosts reach it (default: the address on the route to "
                    "the first host)");
  add_slurm_options(c.run, a);
  add_pack_options(c.run, a);

  c.validate = app.add_subcommand("validate", "Check a spec and print it fully resolved");
  c.validate->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.validate->add_option("overrides", a.overrides, "Overrides key.path=value");

  c.schema = app.add_subcommand("schema", "Print the JSON Schema of experiment specs");

  c.report = app.add_subcommand("report", "Compare runs: report.html, report.md, summary.csv, groups.csv, charts");
  c.report->add_option("dirs", a.report_dirs, "Run or experiment directories (searched recursively)")->required();
  c.report->add_option("--out", a.report_out, "Where to write the report (default: the first directory)");
  c.report->add_option(
      "--target", a.report_flags.target,
      "Target accuracy (0..1) for time-to-accuracy: validation accuracy when every run has a validation "
      "split (dataset.validation), else test accuracy (report.target_acc; with neither, the report takes what "
      "the best configuration reliably reaches, less report.equivalence_pts, or says which to give)");
  c.report->add_option("--target-loss", a.report_flags.target_loss,
                       "Target training loss for steps to target (from steps.jsonl; report.target_loss)");
  c.report->add_option("--equivalence-pts", a.report_flags.equivalence_pts,
                       "Equivalence margin in accuracy points (report.equivalence_pts; default 0.5)");
  c.report->add_option("--final-epochs", a.report_flags.final_epochs,
                       "Compare the mean test accuracy of the last this many epochs (report.final_epochs; default 1)");
  c.worker = app.add_subcommand("worker", "Run one replica (started by ddplab run, torchrun --no-python or srun)");
  c.worker->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.worker->add_option("overrides", a.overrides, "Overrides key.path=value");
  c.worker->add_option("--run-id", a.run_id, "The run directory's name under <output>/<name> (default: seed=<seed>)");
  // One rank of `ddplab plan`'s all-reduce probe (runner/allreduce_probe.h); ddplab starts it, a user never does.
  c.worker->add_option("--allreduce-probe", a.probe_out)->group("");
  c.status =
      app.add_subcommand("status", "Show every run's state from its manifest and, for SLURM jobs, from scontrol");
  a.status_dir = config::with_defaults(nlohmann::json::object())["output"].get<std::string>();
  c.status->add_option(
      "dir", a.status_dir,
      "Experiment (runs/<name>) or run directory; default: the spec's default output, " + a.status_dir);
  c.export_tensorboard = add_export_command(app, a);
  c.plan = add_plan_command(app, a);
  return c;
}

}  // namespace ddplab::app
