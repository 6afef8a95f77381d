// `ddplab worker <spec>`: one replica of a multi-process run, started by ddplab's launcher
// (launch/launcher.h), torchrun --no-python or srun.
//
// The world (rank, size, store) comes from the environment (distributed/world.h); a WORLD_SIZE
// that differs from replicas.count overrides it (with a note on stderr). What ddplab's launcher
// tells its workers comes through the worker environment contract (launch/worker_env.h):
//   - under ddplab's launcher (DDPLAB_RUN_DIR set) the launcher owns the run directory and its
//     manifest; the worker trains (DDPLAB_RESUME=1: from the checkpoint) and, when it fails or
//     diverges, writes its rank's error file for the launcher;
//   - under torchrun or srun rank 0 owns the run directory: it checks the data first (as
//     `ddplab run`, prepare_run.h), makes the directory (a first attempt never replaces a finished run unless
//     DDPLAB_FORCE=1) or, in a restarted attempt (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT
//     > 0) or with DDPLAB_RESUME=1, continues an unfinished run from its checkpoint, and records
//     how the run ended. The other ranks never write to it.
// Exit code: outcome.h (kExitOk, kExitDiverged, 128 + signal, kExitUserError, kExitFailure).
#pragma once
#include <string>
#include <vector>

#include "ddplab/config/spec.h"

namespace ddplab::runner {

// Runs this process's replica of `spec`; returns the exit code.
int run_worker(const config::ExperimentSpec& spec);

// The `worker` command: the spec file at `path` with `overrides`, which must have no sweep keys.
// `run_id` (--run-id) names the run directory <output>/<name>/<run_id> ("": "seed=<seed>"), so
// that the workers of one run of a sweep (ddplab run --launcher slurm) write where `ddplab run`
// would.
int worker_command(const std::string& path, const std::vector<std::string>& overrides, const std::string& run_id = "");

}  // namespace ddplab::runner
