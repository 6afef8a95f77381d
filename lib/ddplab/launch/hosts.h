// Ranks across hosts (`ddplab run --hosts FILE`): a hostfile as DeepSpeed's and mpirun's, one
// host a line, "name" or "name slots=N" (N ranks on it; default 1), "#" starts a comment. Ranks
// fill the hosts in the file's order: ranks 0..N0-1 on the first host, and so on.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ddplab::launch {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// Reads `file`; an Error naming the file and line for a malformed line, a duplicate host or no host.
std::vector<HostSlots> read_hostfile(const std::filesystem::path& file);

// The host of each of `nproc` ranks; an Error naming `file` when its slots are fewer than `nproc`.
std::vector<std::string> place_ranks(const std::vector<HostSlots>& hosts, int nproc, const std::string& file);

// How a launcher reaches the hosts (LaunchOptions::hosts). Empty rank_hosts: every rank on this host.
struct HostPlacement {
  std::vector<std::string> rank_hosts;  // the host of rank r
  // The command prefix that runs a command on a host, "{host}" replaced by the host's name (as
  // the hostfile spells it); the worker's command line and its environment contract follow it.
  std::string remote = "ssh {host}";
  // Where the workers reach the launcher's store: "" means the address of this machine's
  // interface that routes to the first host (distributed/endpoint.h).
  std::string master_addr;
};

// `remote` with "{host}" replaced by `host`, then `argv` (the worker's command line, each
// argument quoted as needed): one shell command line.
std::string remote_command(const std::string& remote, const std::string& host, const std::vector<std::string>& argv);

}  // namespace ddplab::launch
