// The ddplab command line: parse arguments, call lib/, map errors to exit codes
// (0 success, 2 user error, 1 runtime failure).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include <CLI/CLI.hpp>

#include "ddplab/data/dataset.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/launch/launcher.h"
#include "ddplab/distributed/world.h"
#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/report/report.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/train/trainer.h"
#include "ddplab/base/version.h"

namespace fs = std::filesystem;
using namespace ddplab;

namespace {

constexpr int kExitDiverged = 3;

int run_single_or_launch(const config::ExperimentSpec& spec, bool force) {
  // Read the data and build the model before anything is written: a missing or corrupt file, or
  // a spec that does not fit the data or the model, is a user error and leaves no run directory.
  auto data = data::load_dataset(spec.dataset);
  train::check_setup(spec, data);
  // An unfinished run with a checkpoint continues where it stopped, unless --force.
  std::optional<rundir::RunLog> resumed = force ? std::nullopt : rundir::RunLog::resume(spec, "ddplab run again");
  auto run = resumed ? *resumed : rundir::RunLog::create(spec, force);
  if (resumed)
    std::cout << "ddplab: resuming " << run.dir().string() << " from its checkpoint (--force starts over)" << std::endl;
  std::cout << "ddplab: " << spec.name << "/" << rundir::run_id(spec) << ": " << spec.replicas.count
            << (spec.replicas.mode == config::ReplicaMode::kSimulated ? " simulated" : "") << " replica" << (spec.replicas.count > 1 ? "s" : "") << " x batch " << spec.per_replica_batch << " (global "
            << spec.global_batch << "), " << spec.epochs << " epochs; logs in " << run.dir().string() << std::endl;
  // One replica, or N simulated in this process (replicas.mode "simulated"): no workers.
  if (spec.replicas.count == 1 || spec.replicas.mode == config::ReplicaMode::kSimulated) {
    try {
      train::ReplicaOptions options;
      options.run_dir = run.dir();
      options.data = &data;
      options.resume = resumed.has_value();
      train::install_stop_handlers();
      auto result = train::train_replica(spec, distributed::World{}, options);
      run.finish(rundir::RunStatus::kDone);
      std::cout << "ddplab: done, test accuracy " << 100 * result.final_test_acc << "%; logs in "
                << run.dir().string() << std::endl;
      return 0;
    } catch (const train::Diverged& e) {
      run.update_manifest({{"diverged_epoch", e.epoch}, {"diverged_step", e.step}});
      run.finish(rundir::RunStatus::kDiverged, e.what());
      std::cerr << "ddplab: " << e.what() << "; logs in " << run.dir().string() << std::endl;
      return kExitDiverged;
    } catch (const train::Interrupted& e) {
      run.finish(rundir::RunStatus::kInterrupted, e.what());
      std::cerr << "ddplab: " << e.what() << "; logs in " << run.dir().string() << std::endl;
      return 128 + e.signal;
    } catch (const std::exception& e) {
      run.finish(rundir::RunStatus::kFailed, message_of(e));
      throw;
    }
  }
  launch::LaunchOptions options;
  options.nproc = spec.replicas.count;
  options.run_dir = run.dir();
  options.spec_path = rundir::spec_file(run.dir()).string();
  options.timeout_s = spec.replicas.timeout_s;
  options.resume = resumed.has_value();
  auto result = launch::launch_workers(options);
  // replicas.max_restarts: a failed rank stops all; they start again from the last checkpoint.
  for (int restart = 1; result.exit_code == 1 && restart <= spec.replicas.max_restarts; ++restart) {
    std::cerr << "ddplab: rank " << result.failed_rank << " " << result.reason << "; restart " << restart << " of "
              << spec.replicas.max_restarts << std::endl;
    auto again = rundir::RunLog::resume(spec, "rank " + std::to_string(result.failed_rank) + " " + result.reason);
    if (!again) {
      std::cerr << "ddplab: no checkpoint yet; starting over" << std::endl;
      run = rundir::RunLog::create(spec, true);
    }
    options.resume = again.has_value();
    options.restart_count = restart;
    result = launch::launch_workers(options);
  }
  if (result.exit_code == 0) {
    run.finish(rundir::RunStatus::kDone);
    std::cout << "ddplab: done; logs in " << run.dir().string() << std::endl;
    return 0;
  }
  std::string message;
  if (result.exit_code == kExitDiverged) {
    run.finish(rundir::RunStatus::kDiverged, result.reason);
    std::cerr << "ddplab: " << result.reason << "; logs in " << run.dir().string() << std::endl;
    return kExitDiverged;
  }
  if (result.failed_rank >= 0) {
    auto log = rundir::rank_log_file(run.dir(), result.failed_rank);
    message = "rank " + std::to_string(result.failed_rank) + " " + result.reason;
    std::error_code ec;
    for (int r = 0; r < spec.replicas.count; ++r) fs::remove(rundir::rank_error_file(run.dir(), r), ec);
    std::cerr << "ddplab: " << message << "; the other ranks were stopped. Last lines of " << log.string() << ":\n"
              << launch::tail_file(log, 15);
  } else {
    message = result.reason;
    std::cerr << "ddplab: " << message << "; all ranks stopped" << std::endl;
  }
  run.finish(result.exit_code >= 128 ? rundir::RunStatus::kInterrupted : rundir::RunStatus::kFailed, message);
  return result.exit_code;
}

// "" when there is no manifest; a malformed one is an Error naming it.
std::string manifest_status(const fs::path& dir) {
  const auto status = rundir::read_status(dir);
  return status ? rundir::name(*status) : "";
}

std::string minutes_seconds(double seconds) {
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

// `ddplab run`: a spec without sweep keys is one run, as before (an existing run directory needs
// --force). A sweep runs every run in turn, skipping those whose manifest says done (or
// diverged) unless --force, resumes unfinished runs that have a checkpoint, reruns the others, and
// goes on after a failed run; SIGINT stops it after the current run.
int run_experiment(const std::string& path, const std::vector<std::string>& overrides, bool force, bool dry_run) {
  auto doc = config::load_json_file(path);
  for (const auto& o : overrides) config::apply_override(doc, o);
  auto runs = config::expand_sweep(doc, path, config::sweep_key_order(path));
  const bool sweep = config::has_sweep(doc);
  const size_t n = runs.size();
  auto finished = [&](size_t i) {
    if (force) return false;
    auto status = manifest_status(rundir::run_dir(runs[i].spec));
    return status == "done" || status == "diverged";
  };
  if (dry_run) {
    nlohmann::json base = runs.front().spec.resolved;
    try {
      auto plain = doc;
      for (const char* k : {"sweep", "sweep_zip", "repeats"}) plain.erase(k);
      base = config::resolve(plain, path).resolved;
    } catch (const Error&) {
    }
    std::cout << "ddplab: " << runs.front().spec.name << ": " << n << " run" << (n == 1 ? "" : "s")
              << " (dry run: nothing is run or written)" << std::endl;
    for (size_t i = 0; i < n; ++i) {
      std::cout << "[" << i + 1 << "/" << n << "] " << runs[i].run_id
                << (!finished(i) ? "" : sweep ? "  (done: would be skipped)" : "  (done: --force runs it again)") << "\n";
      for (const auto& line : config::resolved_differences(base, runs[i].spec.resolved)) std::cout << "    " << line << "\n";
    }
    std::cout << std::flush;
    // The data are checked too (cheap: files and sizes), so a missing dataset shows up before a
    // long sweep is started: exit code 2, as the real run would give.
    std::set<std::pair<std::string, std::string>> checked;
    int code = 0;
    for (const auto& r : runs) {
      if (!checked.insert({config::name(r.spec.dataset.name), r.spec.dataset.root}).second) continue;
      try {
        data::check_dataset_files(r.spec.dataset);
      } catch (const Error& e) {
        std::cerr << "ddplab: " << e.what() << std::endl;
        code = 2;
      }
    }
    return code;
  }
  if (!sweep) return run_single_or_launch(runs.front().spec, force);

  const std::string name = runs.front().spec.name;
  std::vector<bool> skip(n);
  size_t to_run = 0;
  for (size_t i = 0; i < n; ++i) to_run += (skip[i] = finished(i)) ? 0 : 1;
  std::cout << "ddplab: sweep " << name << ": " << n << " runs, " << n - to_run << " already done" << std::endl;
  size_t done = 0, skipped = 0, diverged = 0, ran = 0;
  std::vector<std::pair<std::string, std::string>> failures;
  double spent_s = 0;
  int stop_code = 0;
  for (size_t i = 0; i < n && stop_code == 0; ++i) {
    const auto& run = runs[i];
    const std::string counter = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] ";
    if (skip[i]) {
      std::cout << counter << "skipping " << run.run_id << ": " << manifest_status(rundir::run_dir(run.spec)) << std::endl;
      ++skipped;
      continue;
    }
    std::cout << counter << run.run_id << " (ETA "
              << (ran == 0 ? std::string("-:--") : minutes_seconds(spent_s / ran * (to_run - ran))) << ")" << std::endl;
    auto start = std::chrono::steady_clock::now();
    int code = 0;
    std::string reason;
    try {
      // An unfinished run with a checkpoint continues from it (as a plain `ddplab run` does);
      // any other unfinished run starts over in a fresh directory.
      code = run_single_or_launch(run.spec, /*force=*/force || !rundir::holds_resumable_run(rundir::run_dir(run.spec)));
    } catch (const std::exception& e) {
      code = dynamic_cast<const Error*>(&e) != nullptr ? 2 : 1;
      reason = message_of(e);
      std::cerr << "ddplab: " << run.run_id << " failed: " << reason << std::endl;
    }
    spent_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++ran;
    std::string status;
    try {
      status = manifest_status(rundir::run_dir(run.spec));
    } catch (const Error&) {  // already reported as this run's failure
    }
    if (code == 0) {
      ++done;
    } else if (code >= 128 || status == "interrupted") {
      stop_code = code >= 128 ? code : 130;
      std::cerr << "ddplab: sweep " << name << " interrupted during " << run.run_id
                << "; run it again to finish the remaining runs (done runs are skipped)" << std::endl;
    } else if (status == "diverged") {
      ++diverged;
    } else {
      if (reason.empty()) {
        try {
          reason = rundir::read_manifest(rundir::run_dir(run.spec)).value("message", "");
        } catch (const std::exception&) {
        }
      }
      if (reason.empty()) reason = "exit code " + std::to_string(code);
      failures.emplace_back(run.run_id, reason);
    }
  }
  std::cout << "ddplab: sweep " << name << ": " << done << " done, " << skipped << " skipped, " << failures.size()
            << " failed";
  if (diverged > 0) std::cout << ", " << diverged << " diverged";
  if (stop_code != 0) std::cout << ", stopped after " << ran + skipped << " of " << n;
  std::cout << std::endl;
  for (const auto& [id, why] : failures) std::cout << "ddplab:   failed " << id << ": " << why << std::endl;
  if (stop_code != 0) return stop_code;
  const fs::path experiment_dir = fs::path(runs.front().spec.output) / runs.front().spec.name;
  try {
    report::ReportOptions options;
    options.inputs = {experiment_dir};
    options.out_dir = experiment_dir;
    auto summary = report::write_report(options);
    std::cout << "ddplab: report of " << summary.runs << " runs in " << summary.groups << " groups: "
              << (experiment_dir / "report.html").string() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "ddplab: the report could not be written: " << message_of(e) << std::endl;
  }
  return failures.empty() ? 0 : 1;
}

int run_report(const std::vector<std::string>& dirs, const std::string& out, double target) {
  report::ReportOptions options;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec))
      throw Error(d + (fs::exists(d, ec) ? ": not a directory" : ": does not exist") + "; give run or experiment directories");
    options.inputs.emplace_back(d);
  }
  options.out_dir = out.empty() ? fs::path(dirs.front()) : fs::path(out);
  if (!(target == 0 || (target > 0 && target <= 1))) {  // 0: not given
    char got[32];
    std::snprintf(got, sizeof got, "%g", target);
    throw Error(std::string("--target: must be a test accuracy in (0, 1], e.g. 0.9, got ") + got);
  }
  if (target > 0) options.target_acc = target;
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  auto summary = report::write_report(options);
  std::cout << "ddplab: report of " << summary.runs << " runs in " << summary.groups << " groups:";
  for (const auto& f : summary.files) std::cout << "\n  " << f.string();
  std::cout << std::endl;
  return 0;
}

int run_worker(const config::ExperimentSpec& spec) {
  if (spec.replicas.mode == config::ReplicaMode::kSimulated)
    throw Error("/replicas/mode: \"simulated\" replicas run in one process; start them with `ddplab run`, not as workers");
  auto world = distributed::discover_world_from_environment();
  if (world.size != spec.replicas.count)
    std::cerr << "ddplab worker: note: WORLD_SIZE " << world.size << " overrides replicas.count "
              << spec.replicas.count << std::endl;
  config::ExperimentSpec s = spec;
  if (world.size != spec.replicas.count) {
    auto doc = spec.resolved;
    doc["replicas"]["count"] = world.size;
    doc["replicas"]["threads"] = 0;
    s = config::resolve(doc, "worker");
  }
  const char* run_dir_env = std::getenv("DDPLAB_RUN_DIR");
  const char* resume_env = std::getenv("DDPLAB_RESUME");
  bool resume = resume_env != nullptr && std::string(resume_env) == "1";
  fs::path run_dir;
  std::optional<rundir::RunLog> own_run;
  std::optional<data::DatasetPair> data;
  if (run_dir_env != nullptr && *run_dir_env != '\0') {
    run_dir = run_dir_env;
  } else {
    // Under torchrun or srun: rank 0 makes the run directory; the others never write to it.
    run_dir = rundir::run_dir(s);
    // A restarted attempt (torchrun --max-restarts) continues from the checkpoint if there is one.
    resume = world.restart_count > 0 && fs::exists(rundir::checkpoint_file(run_dir));
    if (world.rank == 0) {
      // As `ddplab run`: bad data or a spec that does not fit it leaves no run directory.
      data = data::load_dataset(s.dataset);
      train::check_setup(s, *data);
      if (resume) own_run = rundir::RunLog::resume(s, "torchrun restart " + std::to_string(world.restart_count));
      // A first attempt never replaces a finished run; an unfinished one (a failed launch) it does.
      const std::string status = world.restart_count == 0 ? manifest_status(run_dir) : "";
      const char* force_env = std::getenv("DDPLAB_FORCE");
      if ((status == "done" || status == "diverged") && !(force_env != nullptr && std::string(force_env) == "1"))
        throw Error(run_dir.string() + ": holds a finished run (status " + status +
                    "); set DDPLAB_FORCE=1 to replace it, or give another name or output");
      if (!own_run) own_run = rundir::RunLog::create(s, true);
      own_run->update_manifest({{"launcher", world.launcher}});
    }
  }
  std::shared_ptr<distributed::Comm> comm;  // outlives the catch below: peers see our error first
  try {
    train::ReplicaOptions options;
    options.run_dir = run_dir;
    if (world.size > 1) {
      comm = distributed::make_comm(world, s.replicas.backend,
                             std::chrono::milliseconds(static_cast<int64_t>(s.replicas.timeout_s * 1000)));
    }
    options.comm = comm;
    options.data = data ? &*data : nullptr;
    options.resume = resume;
    train::install_stop_handlers();
    train::train_replica(s, world, options);
    if (comm) distributed::shutdown(*comm);
    if (own_run) own_run->finish(rundir::RunStatus::kDone);
  } catch (const train::Diverged& e) {
    std::cerr << "ddplab worker rank " << world.rank << ": " << e.what() << std::endl;
    if (run_dir_env != nullptr && *run_dir_env != '\0') launch::write_error_file(run_dir, world.rank, e.what());
    if (own_run) {
      own_run->update_manifest({{"diverged_epoch", e.epoch}, {"diverged_step", e.step}});
      own_run->finish(rundir::RunStatus::kDiverged, e.what());
    }
    return kExitDiverged;
  } catch (const train::Interrupted& e) {
    std::cerr << "ddplab worker rank " << world.rank << ": " << e.what() << std::endl;
    if (own_run) own_run->finish(rundir::RunStatus::kInterrupted, e.what());
    return 128 + e.signal;
  } catch (const std::exception& e) {
    const std::string message = message_of(e);
    std::cerr << "ddplab worker rank " << world.rank << ": " << message << std::endl;
    if (run_dir_env != nullptr && *run_dir_env != '\0') launch::write_error_file(run_dir, world.rank, message);
    if (own_run) own_run->finish(rundir::RunStatus::kFailed, "rank 0: " + message);
    return dynamic_cast<const Error*>(&e) != nullptr ? 2 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddplab: data-parallel training experiments from JSON specs"};
  app.set_version_flag("--version", std::string("ddplab ") + version() + " (" + git_sha() + ", LibTorch " +
                                        torch_version() + (built_with_cuda() ? ", CUDA" : ", CPU") + ")");
  app.require_subcommand(1);

  std::string spec_path;
  std::vector<std::string> overrides;
  bool force = false;
  bool dry_run = false;

  auto* run = app.add_subcommand("run", "Run an experiment spec (N replicas are launched as N processes)");
  run->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  run->add_option("overrides", overrides, "Overrides key.path=value (value parsed as JSON, else a string)");
  run->add_flag("--force", force, "Replace existing run directories (a sweep reruns its done runs)");
  run->add_flag("--dry-run", dry_run, "List the runs (ids and what each changes), check their data files and exit; nothing is written");

  auto* validate = app.add_subcommand("validate", "Check a spec and print it fully resolved");
  validate->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  validate->add_option("overrides", overrides, "Overrides key.path=value");

  auto* schema = app.add_subcommand("schema", "Print the JSON Schema of experiment specs");

  std::vector<std::string> report_dirs;
  std::string report_out;
  double report_target = 0;
  auto* report_cmd = app.add_subcommand("report", "Compare runs: report.html, report.md, summary.csv, groups.csv, charts");
  report_cmd->add_option("dirs", report_dirs, "Run or experiment directories (searched recursively)")->required();
  report_cmd->add_option("--out", report_out, "Where to write the report (default: the first directory)");
  report_cmd->add_option("--target", report_target, "Target test accuracy (0..1) for time-to-accuracy");
  auto* worker = app.add_subcommand("worker", "Run one replica (started by ddplab run, torchrun --no-python or srun)");
  worker->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  worker->add_option("overrides", overrides, "Overrides key.path=value");

  // CLI11 says only "A subcommand is required" for a mistyped one: name it and the choices.
  std::string names;
  bool known = false;
  for (const auto* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "ddplab: error: unknown command \"" << argv[1] << "\"; commands: " << names << " (ddplab --help)"
              << std::endl;
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    if (schema->parsed()) {
      std::cout << schema_json();
      return 0;
    }
    if (run->parsed()) return run_experiment(spec_path, overrides, force, dry_run);
    if (report_cmd->parsed()) return run_report(report_dirs, report_out, report_target);
    auto doc = config::load_json_file(spec_path);
    for (const auto& o : overrides) config::apply_override(doc, o);
    // validate checks a sweep whole, as `run --dry-run`: every run it expands to must resolve.
    size_t sweep_runs = 0;
    if (validate->parsed() && config::has_sweep(doc))
      sweep_runs = config::expand_sweep(doc, spec_path, config::sweep_key_order(spec_path)).size();
    auto spec = config::resolve(doc, spec_path);
    if (validate->parsed()) {
      if (sweep_runs > 0)
        std::cerr << "ddplab: a sweep of " << sweep_runs << " run" << (sweep_runs == 1 ? "" : "s")
                  << ", all valid; below, the spec without its sweep keys (`ddplab run --dry-run` lists the runs)"
                  << std::endl;
      std::cout << spec.resolved.dump(2) << std::endl;
      return 0;
    }
    if (worker->parsed()) {
      if (config::has_sweep(doc))
        throw Error(spec_path + ": has sweep keys (sweep, sweep_zip or repeats), but a worker runs one spec: run the "
                    "sweep with `ddplab run`, or give the worker a spec file without them");
      return run_worker(spec);
    }
    return run_single_or_launch(spec, force);
  } catch (const Error& e) {
    std::cerr << "ddplab: error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ddplab: failed: " << message_of(e) << std::endl;
    return 1;
  }
}
