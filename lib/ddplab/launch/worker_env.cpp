#include "ddplab/launch/worker_env.h"

#include <algorithm>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/distributed/world.h"

extern char** environ;

namespace ddplab::launch {
namespace {

using Env = std::map<std::string, std::string>;

void read_int(const Env& env, const std::string& name, int& out) { out = distributed::env_int(env, name, out); }

void read_flag(const Env& env, const std::string& name, bool& out) {
  const std::string* v = distributed::env_value(env, name);
  if (v == nullptr) return;
  if (*v != "0" && *v != "1") throw Error(fmt::format("environment variable {}: must be 0 or 1, got \"{}\"", name, *v));
  out = *v == "1";
}

const char* flag(bool on) { return on ? "1" : "0"; }

}  // namespace

bool WorkerEnv::operator==(const WorkerEnv& o) const {
  return rank == o.rank && world_size == o.world_size && local_rank == o.local_rank &&
         local_world_size == o.local_world_size && group_rank == o.group_rank && master_addr == o.master_addr &&
         master_port == o.master_port && restart_count == o.restart_count && launcher == o.launcher &&
         run_dir == o.run_dir && resume == o.resume && force == o.force;
}

const std::vector<std::string>& worker_env_names() {
  static const std::vector<std::string> names = {"RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_RANK",
                                                 "LOCAL_WORLD_SIZE",
                                                 "GROUP_RANK",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "DDPLAB_LAUNCHER",
                                                 "DDPLAB_RUN_DIR",
                                                 "DDPLAB_RESUME",
                                                 "DDPLAB_FORCE"};
  return names;
}

std::map<std::string, std::string> to_environment(const WorkerEnv& e) {
  return {{"RANK", fmt::format("{}", e.rank)},
          {"WORLD_SIZE", fmt::format("{}", e.world_size)},
          {"LOCAL_RANK", fmt::format("{}", e.local_rank)},
          {"LOCAL_WORLD_SIZE", fmt::format("{}", e.local_world_size)},
          {"GROUP_RANK", fmt::format("{}", e.group_rank)},
          {"MASTER_ADDR", e.master_addr},
          {"MASTER_PORT", fmt::format("{}", e.master_port)},
          {"TORCHELASTIC_RESTART_COUNT", fmt::format("{}", e.restart_count)},
          {"DDPLAB_LAUNCHER", e.launcher ? "1" : ""},
          {"DDPLAB_RUN_DIR", e.run_dir.string()},
          {"DDPLAB_RESUME", flag(e.resume)},
          {"DDPLAB_FORCE", flag(e.force)}};
}

WorkerEnv parse_worker_env(const std::map<std::string, std::string>& env) {
  WorkerEnv e;
  read_int(env, "RANK", e.rank);
  read_int(env, "WORLD_SIZE", e.world_size);
  read_int(env, "LOCAL_RANK", e.local_rank);
  read_int(env, "LOCAL_WORLD_SIZE", e.local_world_size);
  read_int(env, "GROUP_RANK", e.group_rank);
  if (const std::string* addr = distributed::env_value(env, "MASTER_ADDR")) e.master_addr = *addr;
  read_int(env, "MASTER_PORT", e.master_port);
  read_int(env, "TORCHELASTIC_RESTART_COUNT", e.restart_count);
  if (const std::string* v = distributed::env_value(env, "DDPLAB_LAUNCHER")) {
    // Any value means ddplab's launcher to world discovery, so only the one it writes is accepted.
    if (*v != "1") throw Error(fmt::format("environment variable DDPLAB_LAUNCHER: must be 1 when set, got \"{}\"", *v));
    e.launcher = true;
  }
  if (const std::string* dir = distributed::env_value(env, "DDPLAB_RUN_DIR")) e.run_dir = *dir;
  read_flag(env, "DDPLAB_RESUME", e.resume);
  read_flag(env, "DDPLAB_FORCE", e.force);
  return e;
}

WorkerEnv worker_env_from_environment() { return parse_worker_env(distributed::process_environment()); }

std::vector<std::string> worker_environment(char** inherited, const WorkerEnv& env) {
  const auto& names = worker_env_names();
  std::vector<std::string> out;
  for (char** e = inherited; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(names.begin(), names.end(), name) == names.end()) out.push_back(kv);
  }
  for (const auto& [name, value] : to_environment(env)) {
    if (!value.empty()) out.push_back(fmt::format("{}={}", name, value));
  }
  return out;
}

}  // namespace ddplab::launch
