#include "ddplab/runner/worker.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/config/sweep.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/world.h"
#include "ddplab/launch/launcher.h"
#include "ddplab/launch/worker_env.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/live_tensorboard.h"
#include "ddplab/runner/outcome.h"
#include "ddplab/runner/prepare_run.h"
#include "ddplab/runtime/denormal.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"

namespace fs = std::filesystem;

namespace ddplab::runner {
namespace {

using rundir::RunStatus;

// The spec with replicas.count set to the world's size, when the launcher says otherwise.
config::ExperimentSpec fit_to_world(const config::ExperimentSpec& spec, const distributed::World& world) {
  if (world.size == spec.replicas.count) return spec;
  complain("ddplab worker: note: WORLD_SIZE {} overrides replicas.count {}", world.size, spec.replicas.count);
  auto doc = spec.resolved;
  doc["replicas"]["count"] = world.size;
  doc["replicas"]["threads"] = 0;
  auto fitted = config::resolve(doc, "worker");
  fitted.run_id = spec.run_id;
  return fitted;
}

// Where this worker writes, and what it owns of the run directory.
struct WorkerRun {
  fs::path dir;
  bool launched = false;  // by ddplab's launcher, which owns the run directory
  bool resume = false;
  std::optional<PreparedRun> own;  // rank 0 under torchrun or srun
};

// Under torchrun or srun: rank 0 makes the run directory; the others never write to it.
void own_run_directory(const config::ExperimentSpec& s, const distributed::World& world, const launch::WorkerEnv& env,
                       WorkerRun& run) {
  run.dir = rundir::run_dir(s);
  // A restarted attempt (torchrun --max-restarts, a requeued SLURM job) or one asked to
  // (DDPLAB_RESUME=1: the jobs of `ddplab run --launcher slurm`) continues the unfinished run
  // from its checkpoint if there is one.
  run.resume = (world.restart_count > 0 || env.resume) && rundir::holds_resumable_run(run.dir);
  if (world.rank != 0) return;
  RunStart start;
  start.resume = run.resume;
  start.resume_reason = world.restart_count > 0 ? fmt::format("{} restart {}", world.launcher, world.restart_count)
                                                : std::string("resubmitted");
  // A first attempt never replaces a finished run; an unfinished one (a failed launch) it does.
  start.replace = true;
  start.keep_finished = world.restart_count == 0 && !env.force;
  run.own = prepare_run(s, start);
  run.own->log.update_manifest({{"launcher", world.launcher}});
}

// After training ended with the exception in flight: says so, leaves the rank's error file for
// ddplab's launcher, records the run when this rank owns it.
int report_failure(const distributed::World& world, const WorkerRun& run, const distributed::Comm* comm) {
  Outcome outcome = outcome_of(std::current_exception());
  if (comm != nullptr && outcome.exit_code == kExitFailure)
    outcome.message = distributed::describe_failure(*comm, outcome.message);
  complain("ddplab worker rank {}: {}", world.rank, outcome.message);
  if (run.launched && outcome.status != RunStatus::kInterrupted)
    launch::write_error_file(run.dir, world.rank, outcome.message);
  if (run.own) {
    if (outcome.status == RunStatus::kFailed && outcome.message.rfind("rank ", 0) != 0)
      outcome.message = fmt::format("rank {}: {}", world.rank, outcome.message);
    record(run.own->log, outcome);
  }
  return outcome.exit_code;
}

// Rank 0: every rank's host and address in the manifest ("ranks"), where a multi-host run shows
// which machine each rank ran on and where its peers reached it.
void record_hosts(const fs::path& dir, const distributed::Comm& comm) {
  auto ranks = nlohmann::json::array();
  for (size_t r = 0; r < comm.hosts.size(); ++r)
    ranks.push_back({{"rank", r}, {"host", comm.hosts[r].host}, {"address", comm.hosts[r].address}});
  rundir::RunLog::open(dir).update_manifest({{"ranks", ranks}});
}

}  // namespace

int run_worker(const config::ExperimentSpec& spec) {
  if (spec.replicas.mode == config::ReplicaMode::kSimulated)
    throw config::spec_error("/replicas/mode",
                             "\"simulated\" replicas run in one process; start them with `ddplab run`, not as workers");
  const auto world = distributed::discover_world_from_environment();
  const config::ExperimentSpec s = fit_to_world(spec, world);
  const auto env = launch::worker_env_from_environment();
  WorkerRun run;
  run.launched = !env.run_dir.empty();
  if (run.launched) {
    run.dir = env.run_dir;
    run.resume = env.resume;
  } else {
    own_run_directory(s, world, env, run);
  }
  std::shared_ptr<distributed::Comm> comm;  // outlives the catch below: peers see our error first
  std::optional<LiveTensorBoard> tensorboard;
  try {
    train::ReplicaOptions options;
    options.run_dir = run.dir;
    // Before the process group, whose threads (Gloo's reductions) take the bits from this one; the
    // Trainer's guard, nested, then covers its intra-op pool.
    const runtime::FlushDenormalGuard flush_denormal(s.replicas.flush_denormal);
    if (world.size > 1)
      comm = distributed::make_comm(world, s.replicas.backend,
                                    std::chrono::milliseconds(static_cast<int64_t>(s.replicas.timeout_s * 1000)));
    if (comm && world.rank == 0) record_hosts(run.dir, *comm);
    options.comm = comm;
    options.data = run.own ? &run.own->data : nullptr;
    options.resume = run.resume;
    tensorboard.emplace(s, world, options);
    const StopSignals stop(StopSignals::Second::kDefaultAction);
    train::train_replica(s, world, options);
    if (comm) distributed::shutdown(*comm);
    // A run that ended near chance is recorded so (finished_outcome; under ddplab's launcher by the
    // launcher), but the worker exits 0 as its peers do: torchrun and srun would take another code
    // for a failure to restart.
    const RunStatus ended = run.own           ? record_done(run.own->log, s).status
                            : world.rank == 0 ? finished_outcome(rundir::RunLog::open(run.dir), s).status
                                              : RunStatus::kDone;
    tensorboard->finish(ended);
  } catch (const std::exception&) {
    if (tensorboard) tensorboard->finish(outcome_of(std::current_exception()).status);
    return report_failure(world, run, comm.get());
  }
  return done_outcome().exit_code;
}

int worker_command(const std::string& path, const std::vector<std::string>& overrides, const std::string& run_id) {
  const auto doc = config::load_document(path, overrides);
  auto spec = config::resolve(doc, path);
  if (!run_id.empty()) config::check_run_id_flag(run_id);
  spec.run_id = run_id;
  if (config::has_sweep(doc))
    throw Error(
        fmt::format("{}: has sweep keys (sweep, sweep_zip or repeats), but a worker runs one spec: run the "
                    "sweep with `ddplab run`, or give the worker a spec file without them",
                    path));
  return run_worker(spec);
}

}  // namespace ddplab::runner
