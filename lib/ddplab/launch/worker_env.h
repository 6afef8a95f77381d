// The worker environment contract: every variable ddplab's launcher sets for a worker, in one
// struct that the launcher writes (to_environment) and the worker reads back (parse_worker_env),
// both through one table (worker_env.cpp) that spells each name once:
//
//   RANK, WORLD_SIZE            this worker's rank and the number of workers
//   LOCAL_RANK, LOCAL_WORLD_SIZE  the same on this host (all of them: one host)
//   GROUP_RANK                  the host's index (0)
//   MASTER_ADDR, MASTER_PORT    the launcher's TCPStore (127.0.0.1, a free port)
//   TORCHELASTIC_RESTART_COUNT  the attempt's number (replicas.max_restarts)
//   DDPLAB_LAUNCHER             "1": ddplab's launcher hosts the store (distributed/world.h)
//   DDPLAB_RUN_DIR              the run directory the launcher made; unset under torchrun or srun,
//                               where rank 0 makes it
//   DDPLAB_RESUME               "1": continue from <run dir>/checkpoint.pt; under torchrun or srun
//                               (the jobs of ddplab run --launcher slurm): continue the unfinished
//                               run in the run directory if it has a checkpoint, else start it
//   DDPLAB_FORCE                "1": under torchrun or srun, replace a finished run
//
// World discovery (distributed/world.h) reads the rank variables itself, torchrun's and SLURM's
// too; this contract is what the launcher promises and what the worker reads of it. An unset or
// empty variable reads as its default (the struct's initial value); a malformed one is an Error
// naming it: "environment variable DDPLAB_RESUME: must be 0 or 1, got \"yes\"".
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ddplab::launch {

struct WorkerEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int restart_count = 0;
  bool launcher = false;          // DDPLAB_LAUNCHER
  std::filesystem::path run_dir;  // DDPLAB_RUN_DIR; empty: not started by ddplab's launcher
  bool resume = false;            // DDPLAB_RESUME
  bool force = false;             // DDPLAB_FORCE

  bool operator==(const WorkerEnv& other) const;
  bool operator!=(const WorkerEnv& other) const { return !(*this == other); }
};

// The names of the variables of the contract, in the order above.
const std::vector<std::string>& worker_env_names();

// The contract's variables for `env`: name -> value (every name of worker_env_names()).
std::map<std::string, std::string> to_environment(const WorkerEnv& env);

// Reads the contract back from `env` (name -> value; tests pass a map).
WorkerEnv parse_worker_env(const std::map<std::string, std::string>& env);

// parse_worker_env of this process's environment (distributed::process_environment).
WorkerEnv worker_env_from_environment();

// A worker's whole environment as "NAME=value" strings: `inherited` (e.g. environ) without any
// variable of the contract, then the contract's variables of `env`.
std::vector<std::string> worker_environment(char** inherited, const WorkerEnv& env);

}  // namespace ddplab::launch
