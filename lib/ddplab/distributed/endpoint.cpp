#include "ddplab/distributed/endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/distributed/world.h"

namespace ddplab::distributed {
namespace {

const char* const kIfnameVariable = "GLOO_SOCKET_IFNAME";

std::string numeric(const sockaddr* sa) {
  char buf[NI_MAXHOST] = {0};
  socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(sa, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return buf;
}

// The first address `host` resolves to (numeric host, or name); an Error naming MASTER_ADDR if none.
sockaddr_storage resolve(const std::string& host, int rank) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr)
    throw Error(fmt::format("rank {}: MASTER_ADDR \"{}\" does not resolve to an address on this host ({})", rank, host,
                            ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  return out;
}

// The source address the kernel would use to reach `to` (a connected UDP socket sends nothing).
std::string routed_source(sockaddr_storage to, const std::string& master_addr, int rank) {
  const auto family = to.ss_family;
  if (family == AF_INET) reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(9);
  if (family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(9);
  int fd = ::socket(family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  const socklen_t to_len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), to_len) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    throw Error(
        fmt::format("rank {}: no route from this host to MASTER_ADDR \"{}\" ({}); check the address, or name "
                    "the interface to use in {}",
                    rank, master_addr, std::strerror(err), kIfnameVariable));
  return numeric(reinterpret_cast<sockaddr*>(&local));
}

// Every interface of this host with its first address (IPv4 before IPv6), in the kernel's order.
std::vector<Endpoint> host_interfaces() {
  ifaddrs* list = nullptr;
  std::vector<Endpoint> out;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const Endpoint& e) { return e.interface == i->ifa_name; });
    std::string address = numeric(i->ifa_addr);
    if (it == out.end())
      out.push_back({i->ifa_name, address, kIfnameVariable});
    else if (i->ifa_addr->sa_family == AF_INET && it->address.find(':') != std::string::npos)
      it->address = address;
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<Endpoint> listed_interfaces(const std::string& list, int rank) {
  const auto present = host_interfaces();
  std::vector<std::string> names;
  for (const auto& e : present) names.push_back(e.interface);
  std::vector<Endpoint> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) continue;
    auto it = std::find_if(present.begin(), present.end(), [&](const Endpoint& e) { return e.interface == name; });
    if (it == present.end())
      throw Error(
          fmt::format("rank {}: {}={}: this host ({}) has no interface \"{}\" with an address; its interfaces: "
                      "{}",
                      rank, kIfnameVariable, list, host_name(), name, fmt::join(names, ", ")));
    out.push_back(*it);
  }
  if (out.empty()) throw Error(fmt::format("rank {}: {}=\"{}\" names no interface", rank, kIfnameVariable, list));
  return out;
}

}  // namespace

bool is_loopback_address(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6) != 0;
  return false;
}

std::string host_name() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::vector<Endpoint> choose_endpoints(const std::string& master_addr, const std::map<std::string, std::string>& env,
                                       int rank) {
  const sockaddr_storage master = resolve(master_addr, rank);
  const bool master_loopback = is_loopback_address(numeric(reinterpret_cast<const sockaddr*>(&master)));
  std::vector<Endpoint> chosen;
  if (const std::string* list = env_value(env, kIfnameVariable))
    chosen = listed_interfaces(*list, rank);
  else if (master_loopback)
    chosen = {{"", "127.0.0.1", "loopback"}};
  else
    chosen = {{"", routed_source(master, master_addr, rank), "route to MASTER_ADDR"}};
  for (const auto& e : chosen)
    if (!master_loopback && is_loopback_address(e.address))
      throw Error(fmt::format(
          "rank {} on host {}: its Gloo device would listen on the loopback address {}{}, which no other host can "
          "reach, while MASTER_ADDR is {}; set {} to the interface that reaches the other hosts (e.g. eth0)",
          rank, host_name(), e.address, e.interface.empty() ? "" : fmt::format(" ({})", e.interface), master_addr,
          kIfnameVariable));
  return chosen;
}

}  // namespace ddplab::distributed
