#include "ddplab/launch/hosts.h"

#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/launch/process.h"

namespace ddplab::launch {

std::vector<HostSlots> read_hostfile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(fmt::format("{}: cannot read the hosts file", file.string()));
  static const std::regex line_form(R"(\s*([A-Za-z0-9_.:-]+)(\s+slots=([0-9]+))?\s*)");
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_form) || (m[3].matched && std::stoi(m[3]) < 1))
      throw Error(fmt::format("{}:{}: expected \"<host>\" or \"<host> slots=<n>\" (n >= 1), got \"{}\"", file.string(),
                              n, line));
    if (!seen.insert(m[1]).second)
      throw Error(fmt::format("{}:{}: host {} is listed twice; give it slots=<n> once", file.string(), n, m[1].str()));
    hosts.push_back({m[1], m[3].matched ? std::stoi(m[3]) : 1});
  }
  if (hosts.empty()) throw Error(fmt::format("{}: lists no host", file.string()));
  return hosts;
}

std::vector<std::string> place_ranks(const std::vector<HostSlots>& hosts, int nproc, const std::string& file) {
  std::vector<std::string> placed;
  for (const auto& h : hosts)
    for (int s = 0; s < h.slots && static_cast<int>(placed.size()) < nproc; ++s) placed.push_back(h.host);
  if (static_cast<int>(placed.size()) < nproc)
    throw Error(
        fmt::format("{}: {} slots on {} hosts, fewer than the run's {} ranks (replicas.count); add hosts or "
                    "slots=<n>",
                    file, placed.size(), hosts.size(), nproc));
  return placed;
}

std::string remote_command(const std::string& remote, const std::string& host, const std::vector<std::string>& argv) {
  std::string prefix = remote;
  for (size_t at = prefix.find("{host}"); at != std::string::npos; at = prefix.find("{host}", at + host.size()))
    prefix.replace(at, 6, host);
  return prefix + " " + shell_command(argv);
}

}  // namespace ddplab::launch
