#include "ddplab/launch/hosts.h"

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "test_util.h"

namespace ddplab::launch {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_file;

std::vector<HostSlots> read(const std::string& text) {
  TempDir dir;
  write_file(dir.path() / "hosts", text);
  return read_hostfile(dir.path() / "hosts");
}

TEST(Hosts, AHostfileListsHostsWithTheirSlotsInOrder) {
  auto hosts = read("# two nodes\nnode0 slots=2\n\n  node1   # the second\n10.0.0.3 slots=1\n");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].host, "node0");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].host, "node1");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].host, "10.0.0.3");
}

TEST(Hosts, RanksFillTheHostsInOrder) {
  EXPECT_EQ(place_ranks({{"a", 2}, {"b", 2}}, 3, "f"), (std::vector<std::string>{"a", "a", "b"}));
  auto message = error_of([] { place_ranks({{"a", 1}, {"b", 2}}, 4, "hosts.txt"); });
  EXPECT_NE(message.find("hosts.txt: 3 slots on 2 hosts, fewer than the run's 4 ranks"), std::string::npos) << message;
}

TEST(Hosts, AMalformedLineOrATwiceListedHostIsAnErrorNamingTheLine) {
  auto bad = error_of([] { read("node0\nnode1 slots=0\n"); });
  EXPECT_NE(bad.find(":2: expected \"<host>\" or \"<host> slots=<n>\""), std::string::npos) << bad;
  auto twice = error_of([] { read("node0\nnode0 slots=2\n"); });
  EXPECT_NE(twice.find(":2: host node0 is listed twice"), std::string::npos) << twice;
  auto empty = error_of([] { read("# nothing\n"); });
  EXPECT_NE(empty.find("lists no host"), std::string::npos) << empty;
}

TEST(Hosts, TheRemoteCommandReplacesTheHostAndQuotesTheArguments) {
  EXPECT_EQ(remote_command("ssh {host}", "node1", {"env", "A=1", "/x y/ddplab", "worker"}),
            "ssh node1 env A=1 '/x y/ddplab' worker");
  EXPECT_EQ(remote_command("ip netns exec {host} --name {host}", "h1", {"true"}), "ip netns exec h1 --name h1 true");
}

}  // namespace
}  // namespace ddplab::launch
