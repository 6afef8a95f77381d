// Who am I in the job: rank, world size, local rank, and where the rendezvous store is.
//
// Read from the environment, in this order of precedence:
//   ddplab's own launcher and torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//     MASTER_ADDR, MASTER_PORT; TORCHELASTIC_USE_AGENT_STORE=True (torchrun) or DDPLAB_LAUNCHER=1
//     (ddplab) mean the launcher hosts the TCPStore and every rank connects as a client;
//     torchrun's store keys live under the prefix "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>".
//   SLURM (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE; the master
//     is MASTER_ADDR or else the first host of SLURM_JOB_NODELIST, the port MASTER_PORT or else
//     12910 + SLURM_JOB_ID % 20000. Rank 0 hosts the store. SLURM_RESTART_COUNT (a requeued
//     job) is the restart count.
//   none of these: a single process, rank 0 of 1.
#pragma once
#include <map>
#include <string>

namespace ddplab::distributed {

// The value of `key` in `env`; nullptr when it is unset or empty.
const std::string* env_value(const std::map<std::string, std::string>& env, const std::string& key);
// `key` as an integer; `fallback` when unset or empty; an Error naming the variable otherwise
// ("environment variable RANK: expected an integer, got \"x\"").
int env_int(const std::map<std::string, std::string>& env, const std::string& key, int fallback);

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool agent_store = false;  // the launcher hosts the store; rank 0 is a client too
  std::string store_prefix;  // "" or "/worker/attempt_<n>" under torchrun's agent store
  int restart_count = 0;
  std::string launcher = "none";  // none | ddplab | torchrun | slurm
};

// Discovers the world from `env` (tests pass a map; the program passes the real environment).
World discover_world(const std::map<std::string, std::string>& env);
World discover_world_from_environment();
// This process's environment as a map (what discover_world_from_environment reads).
std::map<std::string, std::string> process_environment();

// First host of a SLURM node list: "node[03-05,7],gpu1" -> "node03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace ddplab::distributed
