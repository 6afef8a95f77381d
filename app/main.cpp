// The ddplab command line: parse arguments, call lib/, map errors to exit codes
// (0 success, 2 user error, 1 runtime failure).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "ddplab/data/dataset.h"
#include "ddplab/dist/comm.h"
#include "ddplab/dist/launcher.h"
#include "ddplab/dist/world.h"
#include "ddplab/error.h"
#include "ddplab/log/run_log.h"
#include "ddplab/spec/spec.h"
#include "ddplab/train/trainer.h"
#include "ddplab/version.h"

namespace fs = std::filesystem;
using namespace ddplab;

namespace {

int run_single_or_launch(const spec::ExperimentSpec& spec, bool force) {
  // Read the data before anything is written: a missing or corrupt file is a user error
  // and must leave no run directory behind.
  auto data = data::load_dataset(spec.dataset);
  auto run = log::RunLog::create(spec, force);
  std::cout << "ddplab: " << spec.name << "/" << log::run_id(spec) << ": " << spec.replicas.count << " replica"
            << (spec.replicas.count > 1 ? "s" : "") << " x batch " << spec.per_replica_batch << " (global "
            << spec.global_batch << "), " << spec.epochs << " epochs; logs in " << run.dir().string() << std::endl;
  if (spec.replicas.count == 1) {
    try {
      train::ReplicaOptions options;
      options.run_dir = run.dir();
      options.data = &data;
      auto result = train::train_replica(spec, dist::World{}, options);
      run.finish("done");
      std::cout << "ddplab: done, test accuracy " << 100 * result.final_test_acc << "%; logs in "
                << run.dir().string() << std::endl;
      return 0;
    } catch (const std::exception& e) {
      run.finish("failed", e.what());
      throw;
    }
  }
  dist::LaunchOptions options;
  options.nproc = spec.replicas.count;
  options.run_dir = run.dir();
  options.spec_path = (run.dir() / "spec.json").string();
  options.timeout_s = spec.replicas.timeout_s;
  auto result = dist::launch_workers(options);
  if (result.exit_code == 0) {
    run.finish("done");
    std::cout << "ddplab: done; logs in " << run.dir().string() << std::endl;
    return 0;
  }
  std::string message;
  if (result.failed_rank >= 0) {
    auto log = run.dir() / ("rank-" + std::to_string(result.failed_rank) + ".log");
    message = "rank " + std::to_string(result.failed_rank) + " " + result.reason;
    std::error_code ec;
    for (int r = 0; r < spec.replicas.count; ++r) fs::remove(run.dir() / ("rank-" + std::to_string(r) + ".error"), ec);
    std::cerr << "ddplab: " << message << "; the other ranks were stopped. Last lines of " << log.string() << ":\n"
              << dist::tail_file(log, 15);
  } else {
    message = result.reason;
    std::cerr << "ddplab: " << message << "; all ranks stopped" << std::endl;
  }
  run.finish(result.exit_code >= 128 ? "interrupted" : "failed", message);
  return result.exit_code;
}

int run_worker(const spec::ExperimentSpec& spec) {
  auto world = dist::discover_world_from_environment();
  if (world.size != spec.replicas.count)
    std::cerr << "ddplab worker: note: WORLD_SIZE " << world.size << " overrides replicas.count "
              << spec.replicas.count << std::endl;
  spec::ExperimentSpec s = spec;
  if (world.size != spec.replicas.count) {
    auto doc = spec.resolved;
    doc["replicas"]["count"] = world.size;
    doc["replicas"]["threads"] = 0;
    s = spec::resolve(doc, "worker");
  }
  const char* run_dir_env = std::getenv("DDPLAB_RUN_DIR");
  fs::path run_dir;
  std::optional<log::RunLog> own_run;
  if (run_dir_env != nullptr && *run_dir_env != '\0') {
    run_dir = run_dir_env;
  } else {
    // Under torchrun or srun: rank 0 makes the run directory; the others never write to it.
    run_dir = log::run_dir(s);
    if (world.rank == 0) {
      data::check_dataset_files(s.dataset);
      own_run = log::RunLog::create(s, true);
      own_run->update_manifest({{"launcher", world.launcher}});
    }
  }
  std::shared_ptr<dist::Comm> comm;  // outlives the catch below: peers see our error first
  try {
    train::ReplicaOptions options;
    options.run_dir = run_dir;
    if (world.size > 1) {
      comm = dist::make_comm(world, s.replicas.backend,
                             std::chrono::milliseconds(static_cast<int64_t>(s.replicas.timeout_s * 1000)));
    }
    options.comm = comm;
    train::train_replica(s, world, options);
    if (own_run) own_run->finish("done");
  } catch (const std::exception& e) {
    std::cerr << "ddplab worker rank " << world.rank << ": " << e.what() << std::endl;
    if (run_dir_env != nullptr && *run_dir_env != '\0') dist::write_error_file(run_dir, world.rank, e.what());
    if (own_run) own_run->finish("failed", "rank 0: " + std::string(e.what()));
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

  auto* run = app.add_subcommand("run", "Run an experiment spec (N replicas are launched as N processes)");
  run->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  run->add_option("overrides", overrides, "Overrides key.path=value (value parsed as JSON, else a string)");
  run->add_flag("--force", force, "Replace an existing run directory");

  auto* validate = app.add_subcommand("validate", "Check a spec and print it fully resolved");
  validate->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  validate->add_option("overrides", overrides, "Overrides key.path=value");

  auto* schema = app.add_subcommand("schema", "Print the JSON Schema of experiment specs");

  auto* worker = app.add_subcommand("worker", "Run one replica (started by ddplab run, torchrun --no-python or srun)");
  worker->add_option("spec", spec_path, "Experiment spec (JSON)")->required();
  worker->add_option("overrides", overrides, "Overrides key.path=value");

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
    auto spec = spec::load(spec_path, overrides);
    if (validate->parsed()) {
      std::cout << spec.resolved.dump(2) << std::endl;
      return 0;
    }
    if (worker->parsed()) return run_worker(spec);
    return run_single_or_launch(spec, force);
  } catch (const Error& e) {
    std::cerr << "ddplab: error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ddplab: failed: " << e.what() << std::endl;
    return 1;
  }
}
