// The ddplab command line: parses the arguments (CLI11) and hands each command to lib/ddplab/runner
// (`export tensorboard` to lib/ddplab/tensorboard).
// Exit codes: base/exit_codes.h (0 success, 2 user error, 1 runtime failure, 3 diverged, 128 + signal).
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "arguments.h"
#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/base/stdlib_binding.h"
#include "ddplab/base/version.h"
#include "ddplab/runner/allreduce_probe.h"
#include "ddplab/runner/commands.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/run_one.h"
#include "ddplab/runner/slurm.h"
#include "ddplab/runner/status.h"
#include "ddplab/runner/sweep.h"
#include "ddplab/runner/worker.h"
#include "ddplab/tensorboard/export.h"

using namespace ddplab;
using ddplab::app::Arguments;
using ddplab::app::Commands;

namespace {

// CLI11 says only "A subcommand is required" for a mistyped one: name it and the choices.
bool is_unknown_command(CLI::App& app, int argc, char** argv) {
  std::string names;
  bool known = false;
  for (const auto* sub : app.get_subcommands({})) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", sub->get_name());
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc <= 1 || argv[1][0] == '-' || known) return false;
  runner::complain("ddplab: error: unknown command \"{}\"; commands: {} (ddplab --help)", argv[1], names);
  return true;
}

int run_command(const Commands& c, const Arguments& a) {
  const auto refuse = [&](std::initializer_list<const char*> flags, const char* why) {
    for (const char* flag : flags)
      if (c.run->count(flag) > 0) throw Error(fmt::format("{}: {}", flag, why));
  };
  if (a.launcher == Arguments::Launcher::kSlurm) {
    refuse({"--jobs", "--cores", "--gpus", "--run-id"}, "packs runs on this machine, SLURM places them; drop it");
    refuse({"--tee"}, "shows the ranks that ddplab's own launcher starts; a SLURM job's output is its slurm-job.out");
    refuse({"--hosts", "--remote", "--master-addr"}, "SLURM places the ranks on its nodes; drop it");
    return runner::submit_sweep(a.spec_path, a.overrides, runner::SlurmRequest{a.slurm, a.force, a.dry_run});
  }
  refuse({"--partition", "--time", "--account", "--sbatch-option"}, "is a SLURM option; it needs --launcher slurm");
  if (a.hosts.hostfile.empty()) refuse({"--remote", "--master-addr"}, "places ranks across hosts; it needs --hosts");
  if (!a.hosts.hostfile.empty())
    refuse({"--jobs", "--cores", "--gpus"}, "packs runs on this machine; drop it or --hosts");
  runner::set_tee(a.tee);
  runner::set_hosts(a.hosts);
  if (!a.run_id.empty()) return runner::run_with_id(a.spec_path, a.overrides, a.force, a.run_id);
  return runner::run_sweep(a.spec_path, a.overrides, a.force, a.dry_run, a.pack);
}

int export_tensorboard(const Arguments& a) {
  tensorboard::ExportOptions options;
  options.inputs.assign(a.export_dirs.begin(), a.export_dirs.end());
  options.out_dir = a.export_out;
  const tensorboard::ExportSummary summary = tensorboard::export_runs(options);
  for (const auto& w : summary.warnings) runner::complain("warning: {}", w);
  runner::say("ddplab: {} runs exported for TensorBoard under {} (tensorboard --logdir {})", summary.files.size(),
              a.export_out, a.export_out);
  return kExitOk;
}

int dispatch(const Commands& c, const Arguments& a) {
  if (c.schema->parsed()) {
    fmt::print("{}", schema_json());
    return kExitOk;
  }
  if (c.run->parsed()) return run_command(c, a);
  if (c.status->parsed()) return runner::status_command(a.status_dir);
  if (c.report->parsed()) return runner::report(a.report_dirs, a.report_out, a.report_flags);
  if (c.validate->parsed()) return runner::validate(a.spec_path, a.overrides);
  if (c.export_tensorboard->parsed()) return export_tensorboard(a);
  if (c.plan->parsed()) return runner::plan_command(a.plan);
  if (!a.probe_out.empty()) return runner::probe_worker_command(a.spec_path, a.probe_out);
  return runner::worker_command(a.spec_path, a.overrides, a.run_id);
}

}  // namespace

int main(int argc, char** argv) {
  if (const std::string problem = stdlib_binding_problem(); !problem.empty()) {
    runner::complain("ddplab: error: {}", problem);
    return kExitFailure;
  }
  CLI::App app{"ddplab: data-parallel training experiments from JSON specs"};
  app.set_version_flag("--version", fmt::format("ddplab {} ({}, LibTorch {}, {})", version(), git_sha(),
                                                torch_version(), built_with_cuda() ? "CUDA" : "CPU"));
  app.require_subcommand(1);
  Arguments arguments;
  const Commands commands = ddplab::app::add_commands(app, arguments);
  if (is_unknown_command(app, argc, argv)) return kExitUserError;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUserError;
  }
  try {
    return dispatch(commands, arguments);
  } catch (const std::exception&) {
    return runner::command_failed(std::current_exception());
  }
}
