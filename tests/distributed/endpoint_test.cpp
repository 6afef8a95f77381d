#include "ddplab/distributed/endpoint.h"

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "test_util.h"

// The routed choice and the loopback trap across hosts are tested on emulated hosts
// (tests/integration/netlab_test.cpp); here what needs no second host.
namespace ddplab::distributed {
namespace {

using testing::error_of;

TEST(Endpoint, ALoopbackMasterListensOnLoopback) {
  for (const char* master : {"127.0.0.1", "localhost"}) {
    auto chosen = choose_endpoints(master, {}, 0);
    ASSERT_EQ(chosen.size(), 1u) << master;
    EXPECT_EQ(chosen[0].address, "127.0.0.1") << master;
    EXPECT_EQ(chosen[0].how, "loopback");
  }
}

TEST(Endpoint, GlooSocketIfnameListsTheInterfacesInOrder) {
  auto chosen = choose_endpoints("127.0.0.1", {{"GLOO_SOCKET_IFNAME", "lo,lo"}}, 0);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].interface, "lo");
  EXPECT_EQ(chosen[0].address, "127.0.0.1");
  EXPECT_EQ(chosen[1].how, "GLOO_SOCKET_IFNAME");
}

TEST(Endpoint, AnInterfaceThisHostLacksIsAnErrorNamingTheVariableAndTheInterfaces) {
  auto message = error_of([] { choose_endpoints("127.0.0.1", {{"GLOO_SOCKET_IFNAME", "lo,nic9"}}, 3); });
  EXPECT_NE(message.find("rank 3: GLOO_SOCKET_IFNAME=lo,nic9"), std::string::npos) << message;
  EXPECT_NE(message.find("no interface \"nic9\""), std::string::npos) << message;
  EXPECT_NE(message.find("its interfaces: lo"), std::string::npos) << message;
}

TEST(Endpoint, AMasterThatDoesNotResolveIsAnErrorNamingIt) {
  auto message = error_of([] { choose_endpoints("no-such-host.invalid", {}, 1); });
  EXPECT_NE(message.find("rank 1: MASTER_ADDR \"no-such-host.invalid\" does not resolve"), std::string::npos)
      << message;
}

TEST(Endpoint, LoopbackAddressesAreTheLoopbackRanges) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.1.2.3"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_FALSE(is_loopback_address("10.77.0.1"));
  EXPECT_FALSE(is_loopback_address("128.0.0.1"));
  EXPECT_FALSE(is_loopback_address("fe80::1"));
  EXPECT_FALSE(is_loopback_address("localhost"));  // numeric only
}

}  // namespace
}  // namespace ddplab::distributed
