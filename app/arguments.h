// The ddplab command line's arguments and subcommands (CLI11): what main.cpp parses. Only the
// option definitions live here; main.cpp dispatches them to lib/ddplab/runner.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ddplab/config/slurm.h"
#include "ddplab/runner/commands.h"
#include "ddplab/runner/plan_command.h"
#include "ddplab/runner/run_one.h"
#include "ddplab/runner/scheduler.h"

namespace ddplab::app {

struct Arguments {
  std::string spec_path;
  std::vector<std::string> overrides;
  bool force = false;
  bool dry_run = false;
  bool tee = false;            // run --tee
  runner::HostsRequest hosts;  // run --hosts, --remote, --master-addr
  enum class Launcher { kLocal, kSlurm } launcher = Launcher::kLocal;
  config::SlurmOptions slurm;  // --partition, --time, --account, --sbatch-option
  runner::PackOptions pack;    // --jobs, --cores, --gpus
  std::string run_id;          // run / worker --run-id
  std::string probe_out;       // worker --allreduce-probe FILE (hidden)
  std::string status_dir;
  std::vector<std::string> report_dirs;
  std::string report_out;
  runner::ReportFlags report_flags;      // --target, --target-loss, --equivalence-pts, --final-epochs
  std::vector<std::string> export_dirs;  // export tensorboard DIR...
  std::string export_out;                // export tensorboard --out
  runner::PlanRequest plan;              // plan SPEC --grid ... | --calibration DIR... | --check plan.json DIR...
};

struct Commands {
  CLI::App* run;
  CLI::App* validate;
  CLI::App* schema;
  CLI::App* report;
  CLI::App* worker;
  CLI::App* status;
  CLI::App* export_tensorboard;  // `export tensorboard` (a subcommand of `export`)
  CLI::App* plan;
};

// Defines every subcommand and option on `app`, parsing into `a` (which must outlive `app`).
Commands add_commands(CLI::App& app, Arguments& a);

}  // namespace ddplab::app
