// Where a rank's Gloo transport listens: the network address its peers connect to.
//
// choose_endpoints() decides it from the environment, as PyTorch's ProcessGroupGloo binding does
// and better where that fails:
//   GLOO_SOCKET_IFNAME set ("eth0" or a comma list "eth0,ib0"): one device per listed interface,
//     in that order (PyTorch's rule); an interface this host lacks, or one without an address, is
//     an Error naming the variable and the host's interfaces.
//   unset, and MASTER_ADDR a loopback address (127.0.0.1, localhost): 127.0.0.1, one host.
//   unset otherwise: the address of the interface the kernel routes MASTER_ADDR by (the source
//     address of a UDP socket connected to it, which sends nothing). PyTorch takes the address of
//     the machine's host name instead, which in many containers is 127.0.0.1 or nothing at all,
//     and then fails only after its connect timeout.
// A device on a loopback address while MASTER_ADDR is not a loopback address can reach no other
// host: that is an Error at once, naming GLOO_SOCKET_IFNAME. NCCL reads NCCL_SOCKET_IFNAME itself.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace ddplab::distributed {

struct Endpoint {
  std::string interface;  // the interface's name; "" when chosen by route or loopback
  std::string address;    // numeric IPv4 or IPv6 address the device binds
  std::string how;        // "GLOO_SOCKET_IFNAME", "route to MASTER_ADDR" or "loopback"
};

// The endpoints of this rank (one, or one per GLOO_SOCKET_IFNAME entry); `env` is the process's
// environment (tests pass a map). Throws ddplab::Error as described above; `rank` names the rank.
std::vector<Endpoint> choose_endpoints(const std::string& master_addr, const std::map<std::string, std::string>& env,
                                       int rank);

// Whether `address` (numeric) is a loopback address (127.0.0.0/8, ::1).
bool is_loopback_address(const std::string& address);

// This machine's host name (gethostname), as the manifest records it.
std::string host_name();

}  // namespace ddplab::distributed
