#include "ddplab/distributed/world.h"

#include <cstdlib>

#include <fmt/format.h>

#include "ddplab/base/error.h"

extern char** environ;

namespace ddplab::distributed {

const std::string* env_value(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int env_int(const std::map<std::string, std::string>& env, const std::string& key, int fallback) {
  const std::string* v = env_value(env, key);
  if (v == nullptr) return fallback;
  try {
    size_t used = 0;
    int n = std::stoi(*v, &used);
    if (used != v->size()) throw std::invalid_argument(*v);
    return n;
  } catch (const std::exception&) {
    throw Error(fmt::format("environment variable {}: expected an integer, got \"{}\"", key, *v));
  }
}

std::string first_slurm_host(const std::string& nodelist) {
  size_t comma = nodelist.find(',');
  size_t bracket = nodelist.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) return nodelist.substr(0, comma);
  std::string prefix = nodelist.substr(0, bracket);
  size_t end = nodelist.find_first_of("-,]", bracket + 1);
  return prefix + nodelist.substr(bracket + 1, end - bracket - 1);
}

World discover_world(const std::map<std::string, std::string>& env) {
  World w;
  const bool has_rank = env_value(env, "RANK") != nullptr, has_size = env_value(env, "WORLD_SIZE") != nullptr;
  if (has_rank != has_size)
    throw Error(std::string("environment variable ") + (has_rank ? "WORLD_SIZE" : "RANK") + ": is not set, but " +
                (has_rank ? "RANK" : "WORLD_SIZE") +
                " is; a torchrun-style launch sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT together");
  if (has_rank && has_size) {
    w.rank = env_int(env, "RANK", 0);
    w.size = env_int(env, "WORLD_SIZE", 1);
    w.local_rank = env_int(env, "LOCAL_RANK", w.rank);
    w.local_size = env_int(env, "LOCAL_WORLD_SIZE", w.size);
    if (const auto* a = env_value(env, "MASTER_ADDR")) w.master_addr = *a;
    w.master_port = env_int(env, "MASTER_PORT", 0);
    w.restart_count = env_int(env, "TORCHELASTIC_RESTART_COUNT", 0);
    if (env_value(env, "DDPLAB_LAUNCHER") != nullptr) {
      w.launcher = "ddplab";
      w.agent_store = true;
    } else if (env_value(env, "TORCHELASTIC_RUN_ID") != nullptr ||
               env_value(env, "TORCHELASTIC_RESTART_COUNT") != nullptr) {
      w.launcher = "torchrun";
      const auto* agent = env_value(env, "TORCHELASTIC_USE_AGENT_STORE");
      w.agent_store = agent != nullptr && (*agent == "True" || *agent == "true" || *agent == "1");
      if (w.agent_store) w.store_prefix = fmt::format("/worker/attempt_{}", w.restart_count);
    } else {
      w.launcher = "env";
    }
    if (env_value(env, "MASTER_PORT") == nullptr && w.size > 1)
      throw Error("environment variable MASTER_PORT: must be set for WORLD_SIZE > 1");
  } else if (env_value(env, "SLURM_PROCID") != nullptr && env_value(env, "SLURM_NTASKS") != nullptr) {
    w.launcher = "slurm";
    w.rank = env_int(env, "SLURM_PROCID", 0);
    w.size = env_int(env, "SLURM_NTASKS", 1);
    w.local_rank = env_int(env, "SLURM_LOCALID", 0);
    w.local_size = env_int(env, "SLURM_NTASKS_PER_NODE", w.size);
    if (const auto* a = env_value(env, "MASTER_ADDR"))
      w.master_addr = *a;
    else if (const auto* nodes = env_value(env, "SLURM_JOB_NODELIST"))
      w.master_addr = first_slurm_host(*nodes);
    w.master_port = env_int(env, "MASTER_PORT", 12910 + env_int(env, "SLURM_JOB_ID", 0) % 20000);
    w.restart_count = env_int(env, "SLURM_RESTART_COUNT", 0);  // a requeued job (scontrol requeue, preemption)
  }
  if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
    throw Error(fmt::format("rank {} is outside the world of size {}", w.rank, w.size));
  if (w.local_rank < 0 || w.local_rank >= w.local_size)
    throw Error(
        fmt::format("local rank {} is outside the {} ranks of this node (LOCAL_RANK / SLURM_LOCALID must be in "
                    "0..{})",
                    w.local_rank, w.local_size, w.local_size - 1));
  if (w.size > 1 && (w.master_port < 1 || w.master_port > 65535))
    throw Error(fmt::format("environment variable MASTER_PORT: must be a TCP port, 1 to 65535, got {}", w.master_port));
  return w;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

World discover_world_from_environment() { return discover_world(process_environment()); }

}  // namespace ddplab::distributed
