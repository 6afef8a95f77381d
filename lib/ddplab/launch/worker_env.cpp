#include "ddplab/launch/worker_env.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/distributed/world.h"

extern char** environ;

namespace ddplab::launch {
namespace {

using Env = std::map<std::string, std::string>;

// The contract, one row per variable in the header's order: its name and the field it carries. A
// marker is a bool written "1" or not at all, and read as set (DDPLAB_LAUNCHER); another bool is a
// flag, "0" or "1".
struct Variable {
  const char* name;
  std::variant<int WorkerEnv::*, std::string WorkerEnv::*, std::filesystem::path WorkerEnv::*, bool WorkerEnv::*> field;
  bool marker = false;
};

const std::array<Variable, 12>& contract() {
  static const std::array<Variable, 12> variables{{{"RANK", &WorkerEnv::rank},
                                                   {"WORLD_SIZE", &WorkerEnv::world_size},
                                                   {"LOCAL_RANK", &WorkerEnv::local_rank},
                                                   {"LOCAL_WORLD_SIZE", &WorkerEnv::local_world_size},
                                                   {"GROUP_RANK", &WorkerEnv::group_rank},
                                                   {"MASTER_ADDR", &WorkerEnv::master_addr},
                                                   {"MASTER_PORT", &WorkerEnv::master_port},
                                                   {"TORCHELASTIC_RESTART_COUNT", &WorkerEnv::restart_count},
                                                   {"DDPLAB_LAUNCHER", &WorkerEnv::launcher, /*marker=*/true},
                                                   {"DDPLAB_RUN_DIR", &WorkerEnv::run_dir},
                                                   {"DDPLAB_RESUME", &WorkerEnv::resume},
                                                   {"DDPLAB_FORCE", &WorkerEnv::force}}};
  return variables;
}

std::string written(const Variable& v, const WorkerEnv& e) {
  return std::visit(
      [&](auto field) -> std::string {
        using T = std::decay_t<decltype(e.*field)>;
        if constexpr (std::is_same_v<T, int>) return fmt::format("{}", e.*field);
        if constexpr (std::is_same_v<T, std::string>) return e.*field;
        if constexpr (std::is_same_v<T, std::filesystem::path>) return (e.*field).string();
        if constexpr (std::is_same_v<T, bool>) return e.*field ? "1" : v.marker ? "" : "0";
      },
      v.field);
}

void read(const Variable& v, const Env& env, WorkerEnv& e) {
  const std::string* value = distributed::env_value(env, v.name);
  std::visit(
      [&](auto field) {
        using T = std::decay_t<decltype(e.*field)>;
        if constexpr (std::is_same_v<T, int>) {
          e.*field = distributed::env_int(env, v.name, e.*field);
        } else if constexpr (std::is_same_v<T, bool>) {
          if (value == nullptr) return;
          // Any value of a marker means ddplab's launcher to world discovery, so only the one it
          // writes is accepted.
          if (v.marker && *value != "1")
            throw Error(fmt::format("environment variable {}: must be 1 when set, got \"{}\"", v.name, *value));
          if (*value != "0" && *value != "1")
            throw Error(fmt::format("environment variable {}: must be 0 or 1, got \"{}\"", v.name, *value));
          e.*field = *value == "1";
        } else if (value != nullptr) {
          e.*field = *value;
        }
      },
      v.field);
}

}  // namespace

bool WorkerEnv::operator==(const WorkerEnv& o) const {
  for (const Variable& v : contract())
    if (!std::visit([&](auto field) { return this->*field == o.*field; }, v.field)) return false;
  return true;
}

const std::vector<std::string>& worker_env_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Variable& v : contract()) out.emplace_back(v.name);
    return out;
  }();
  return names;
}

std::map<std::string, std::string> to_environment(const WorkerEnv& e) {
  std::map<std::string, std::string> out;
  for (const Variable& v : contract()) out[v.name] = written(v, e);
  return out;
}

WorkerEnv parse_worker_env(const std::map<std::string, std::string>& env) {
  WorkerEnv e;
  for (const Variable& v : contract()) read(v, env, e);
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
