// The ddplab command line: parses the arguments (CLI11) and hands each command to lib/ddplab/runner.
// Exit codes: base/exit_codes.h (0 success, 2 user error, 1 runtime failure, 3 diverged, 128 + signal).
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ddplab/base/exit_codes.h"
#include "ddplab/base/version.h"
#include "ddplab/runner/commands.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/sweep.h"
#include "ddplab/runner/worker.h"

using namespace ddplab;

namespace {

struct Arguments {
  std::string spec_path;
  std::vector<std::string> overrides;
  bool force = false;
  bool dry_run = false;
  std::vector<std::string> report_dirs;
  std::string report_out;
  runner::ReportFlags report_flags;
};

struct Commands {
  CLI::App* run;
  CLI::App* validate;
  CLI::App* schema;
  CLI::App* report;
  CLI::App* worker;
};

Commands add_commands(CLI::App& app, Arguments& a) {
  Commands c{};
  c.run = app.add_subcommand("run", "Run an experiment spec (N replicas are launched as N processes)");
  c.run->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.run->add_option("overrides", a.overrides, "Overrides key.path=value (value parsed as JSON, else a string)");
  c.run->add_flag("--force", a.force, "Replace existing run directories (a sweep reruns its done runs)");
  c.run->add_flag("--dry-run", a.dry_run,
                  "List the runs (ids and what each changes), check their data files and exit; nothing is written");

  c.validate = app.add_subcommand("validate", "Check a spec and print it fully resolved");
  c.validate->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.validate->add_option("overrides", a.overrides, "Overrides key.path=value");

  c.schema = app.add_subcommand("schema", "Print the JSON Schema of experiment specs");

  c.report = app.add_subcommand("report", "Compare runs: report.html, report.md, summary.csv, groups.csv, charts");
  c.report->add_option("dirs", a.report_dirs, "Run or experiment directories (searched recursively)")->required();
  c.report->add_option("--out", a.report_out, "Where to write the report (default: the first directory)");
  c.report->add_option("--target", a.report_flags.target, "Target test accuracy (0..1) for time-to-accuracy");
  c.report->add_option("--target-loss", a.report_flags.target_loss,
                       "Target training loss for steps to target (from steps.jsonl; report.target_loss)");
  c.report->add_option("--equivalence-pts", a.report_flags.equivalence_pts,
                       "Equivalence margin in accuracy points (report.equivalence_pts; default 0.5)");
  c.report->add_option("--final-epochs", a.report_flags.final_epochs,
                       "Compare the mean test accuracy of the last this many epochs (report.final_epochs; default 1)");
  c.worker = app.add_subcommand("worker", "Run one replica (started by ddplab run, torchrun --no-python or srun)");
  c.worker->add_option("spec", a.spec_path, "Experiment spec (JSON)")->required();
  c.worker->add_option("overrides", a.overrides, "Overrides key.path=value");
  return c;
}

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

int dispatch(const Commands& c, const Arguments& a) {
  if (c.schema->parsed()) {
    fmt::print("{}", schema_json());
    return kExitOk;
  }
  if (c.run->parsed()) return runner::run_sweep(a.spec_path, a.overrides, a.force, a.dry_run);
  if (c.report->parsed()) return runner::report(a.report_dirs, a.report_out, a.report_flags);
  if (c.validate->parsed()) return runner::validate(a.spec_path, a.overrides);
  return runner::worker_command(a.spec_path, a.overrides);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddplab: data-parallel training experiments from JSON specs"};
  app.set_version_flag("--version", fmt::format("ddplab {} ({}, LibTorch {}, {})", version(), git_sha(),
                                                torch_version(), built_with_cuda() ? "CUDA" : "CPU"));
  app.require_subcommand(1);
  Arguments arguments;
  const Commands commands = add_commands(app, arguments);
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
