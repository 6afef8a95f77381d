#include "ddplab/config/slurm.h"

#include <algorithm>
#include <array>
#include <regex>

#include <fmt/format.h>

#include "ddplab/base/error.h"

namespace ddplab::config {

bool SlurmOptions::operator==(const SlurmOptions& o) const {
  return partition == o.partition && time == o.time && account == o.account && options == o.options;
}

namespace {

// What a field is called in a message: "/slurm/time" in a spec, "--time" on the command line.
std::string field_name(const std::string& field, SlurmNames names) {
  return names == SlurmNames::kSpec ? fmt::format("/slurm/{}", field) : fmt::format("--{}", field);
}

bool has_space(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; });
}

void check_word(const std::string& value, const std::string& field, SlurmNames names) {
  if (!value.empty() && has_space(value))
    throw Error(
        fmt::format("{}: expected a SLURM {} name without spaces, got \"{}\"", field_name(field, names), field, value));
}

// SLURM's time formats (sbatch(1), --time); after the first field, minutes and seconds are < 60.
bool is_time_limit(const std::string& t) {
  static const std::regex format("UNLIMITED|INFINITE|[0-9]+(:[0-5]?[0-9]){0,2}|[0-9]+-[0-9]+(:[0-5]?[0-9]){0,2}");
  return t.size() <= 32 && std::regex_match(t, format);
}

// The options ddplab sets itself or that have a field of their own, and what to do instead.
struct Reserved {
  std::array<const char*, 2> spellings;  // long, short ("" if none)
  const char* instead;
};
constexpr std::array<Reserved, 13> kReserved{{
    {{"--ntasks", "-n"}, "ddplab asks for one task per replica (replicas.count)"},
    {{"--cpus-per-task", "-c"}, "ddplab asks for replicas.threads CPUs per task"},
    {{"--gpus-per-task", ""}, "ddplab asks for one GPU per task on cuda"},
    {{"--job-name", "-J"}, "ddplab names each job <name>/<run id>"},
    {{"--output", "-o"}, "ddplab writes each job's output into its run directory"},
    {{"--error", "-e"}, "ddplab writes each job's output into its run directory"},
    {{"--open-mode", ""}, "ddplab appends a requeued job's output"},
    {{"--dependency", "-d"}, "ddplab makes the report job depend on the runs' jobs"},
    {{"--parsable", ""}, "ddplab reads the job id with it"},
    {{"--wrap", ""}, "ddplab writes each job's batch script"},
    {{"--partition", "-p"}, "use the partition field"},
    {{"--time", "-t"}, "use the time field"},
    {{"--account", "-A"}, "use the account field"},
}};

// The reserved option `option` spells ("--ntasks=4", "-n4", "-n"), if any.
const Reserved* reserved_option(const std::string& option) {
  const std::string name = option.substr(0, option.find('='));
  for (const auto& r : kReserved) {
    if (name == r.spellings[0]) return &r;
    const std::string short_name = r.spellings[1];
    if (!short_name.empty() && option.rfind(short_name, 0) == 0) return &r;
  }
  return nullptr;
}

void check_option(const std::string& option, const std::string& where) {
  if (option.size() < 2 || option[0] != '-')
    throw Error(
        fmt::format("{}: expected an sbatch option starting with '-' (one argument each, e.g. "
                    "\"--qos=high\"), got \"{}\"",
                    where, option));
  if (has_space(option))
    throw Error(
        fmt::format("{}: expected one sbatch argument without spaces (\"--qos=high\", not \"--qos high\"), "
                    "got \"{}\"",
                    where, option));
  if (const Reserved* r = reserved_option(option))
    throw Error(fmt::format("{}: \"{}\" is not allowed here: {}", where, option, r->instead));
}

std::string string_field(const nlohmann::json& section, const char* key) {
  auto it = section.find(key);
  if (it == section.end()) return "";
  if (!it->is_string()) throw Error(fmt::format("/slurm/{}: expected a string, got {}", key, it->dump()));
  return it->get<std::string>();
}

}  // namespace

void check_slurm_options(const SlurmOptions& o, SlurmNames names) {
  check_word(o.partition, "partition", names);
  check_word(o.account, "account", names);
  if (!o.time.empty() && !is_time_limit(o.time))
    throw Error(
        fmt::format("{}: expected a SLURM time limit (minutes \"90\", \"M:S\", \"H:M:S\", \"D-H\", \"D-H:M\", "
                    "\"D-H:M:S\" or \"UNLIMITED\"), got \"{}\"",
                    field_name("time", names), o.time));
  for (size_t i = 0; i < o.options.size(); ++i)
    check_option(o.options[i], names == SlurmNames::kSpec ? fmt::format("/slurm/options/{}", i)
                                                          : fmt::format("--sbatch-option \"{}\"", o.options[i]));
}

SlurmOptions slurm_options(const nlohmann::json& doc) {
  SlurmOptions o;
  if (!doc.is_object() || !doc.contains("slurm")) return o;
  const nlohmann::json& section = doc["slurm"];
  if (!section.is_object()) throw Error(fmt::format("/slurm: expected an object, got {}", section.dump()));
  o.partition = string_field(section, "partition");
  o.time = string_field(section, "time");
  o.account = string_field(section, "account");
  if (section.contains("options")) {
    const auto& options = section["options"];
    if (!options.is_array()) throw Error(fmt::format("/slurm/options: expected an array, got {}", options.dump()));
    for (size_t i = 0; i < options.size(); ++i) {
      if (!options[i].is_string())
        throw Error(fmt::format("/slurm/options/{}: expected a string, got {}", i, options[i].dump()));
      o.options.push_back(options[i].get<std::string>());
    }
  }
  check_slurm_options(o, SlurmNames::kSpec);
  return o;
}

SlurmOptions merged(const SlurmOptions& base, const SlurmOptions& over) {
  SlurmOptions m = base;
  if (!over.partition.empty()) m.partition = over.partition;
  if (!over.time.empty()) m.time = over.time;
  if (!over.account.empty()) m.account = over.account;
  m.options.insert(m.options.end(), over.options.begin(), over.options.end());
  return m;
}

}  // namespace ddplab::config
