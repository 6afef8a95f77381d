#include "ddplab/distributed/world.h"

#include <gtest/gtest.h>

#include "ddplab/base/error.h"

namespace ddplab::distributed {
namespace {

using Env = std::map<std::string, std::string>;

std::string world_error(const Env& env) {
  try {
    discover_world(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(World, EmptyEnvironmentIsOneProcess) {
  World w = discover_world({});
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.local_size, 1);
  EXPECT_EQ(w.launcher, "none");
  EXPECT_FALSE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "");
}

TEST(World, UnrelatedVariablesAreIgnored) {
  World w = discover_world({{"HOME", "/root"}, {"LOCAL_RANK", "3"}});  // no RANK, WORLD_SIZE
  EXPECT_EQ(w.launcher, "none");
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
}

TEST(World, TorchrunEnvironmentWithAgentStore) {
  Env env{{"RANK", "3"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RUN_ID", "job-42"},
          {"TORCHELASTIC_RESTART_COUNT", "2"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  World w = discover_world(env);
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_addr, "node0");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.restart_count, 2);
  EXPECT_TRUE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "/worker/attempt_2");
}

TEST(World, TorchrunWithoutAgentStoreHasNoPrefix) {
  Env env{{"RANK", "0"},           {"WORLD_SIZE", "2"},          {"MASTER_ADDR", "10.0.0.1"},
          {"MASTER_PORT", "1234"}, {"TORCHELASTIC_RUN_ID", "x"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
  World w = discover_world(env);
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_FALSE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "");
  EXPECT_EQ(w.restart_count, 0);
  EXPECT_EQ(w.local_rank, 0);  // LOCAL_RANK defaults to RANK
  EXPECT_EQ(w.local_size, 2);  // LOCAL_WORLD_SIZE defaults to WORLD_SIZE
}

TEST(World, DdplabLauncherEnvironment) {
  Env env{{"RANK", "1"},
          {"WORLD_SIZE", "2"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "40001"},
          {"DDPLAB_LAUNCHER", "1"}};
  World w = discover_world(env);
  EXPECT_EQ(w.launcher, "ddplab");
  EXPECT_TRUE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "");
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(w.master_port, 40001);
}

TEST(World, PlainRankEnvironmentIsEnvLauncher) {
  World w = discover_world({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(w.launcher, "env");
  EXPECT_FALSE(w.agent_store);
}

TEST(World, SlurmEnvironment) {
  Env env{{"SLURM_PROCID", "4"},
          {"SLURM_NTASKS", "6"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[03-05,7],cpu1"},
          {"SLURM_JOB_ID", "123456"}};
  World w = discover_world(env);
  EXPECT_EQ(w.launcher, "slurm");
  EXPECT_EQ(w.rank, 4);
  EXPECT_EQ(w.size, 6);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.master_addr, "gpu03");
  EXPECT_EQ(w.master_port, 12910 + 3456);  // 123456 % 20000 = 3456
  EXPECT_FALSE(w.agent_store);
}

TEST(World, SlurmMasterAddrAndPortOverrideTheDerivedOnes) {
  Env env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},   {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_JOB_ID", "7"}, {"MASTER_ADDR", "head"}, {"MASTER_PORT", "5555"}};
  World w = discover_world(env);
  EXPECT_EQ(w.master_addr, "head");
  EXPECT_EQ(w.master_port, 5555);
}

TEST(World, ARequeuedSlurmJobCountsAsARestart) {
  Env env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}};
  EXPECT_EQ(discover_world(env).restart_count, 0);
  env["SLURM_RESTART_COUNT"] = "2";
  EXPECT_EQ(discover_world(env).restart_count, 2) << "the worker then continues from the checkpoint";
}

TEST(World, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("a"), "a");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("n[1-3]"), "n1");
  EXPECT_EQ(first_slurm_host("n[7,9]"), "n7");
  EXPECT_EQ(first_slurm_host("gpu[03-05,7],cpu1"), "gpu03");
  EXPECT_EQ(first_slurm_host("login1,n[2-4]"), "login1");
}

TEST(World, NonIntegerRankIsAnErrorNamingTheVariable) {
  std::string msg = world_error({{"RANK", "abc"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(msg.find("RANK"), std::string::npos) << msg;
  EXPECT_NE(msg.find("abc"), std::string::npos) << msg;
}

TEST(World, TrailingGarbageInIntegerIsAnError) {
  std::string msg = world_error({{"RANK", "0"}, {"WORLD_SIZE", "2x"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(msg.find("WORLD_SIZE"), std::string::npos) << msg;
}

TEST(World, RankOutsideTheWorldIsAnError) {
  std::string msg = world_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 2"), std::string::npos) << msg;
  EXPECT_NE(world_error({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "5"}}), "");
  EXPECT_NE(world_error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}), "");
}

TEST(World, MultiProcessWithoutMasterPortIsAnError) {
  std::string msg = world_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("MASTER_PORT"), std::string::npos) << msg;
}

TEST(World, MasterPortOutsideTheTcpRangeIsAnError) {
  for (const char* port : {"70000", "0", "-5"}) {
    std::string msg = world_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", port}});
    EXPECT_NE(msg.find("MASTER_PORT: must be a TCP port, 1 to 65535, got " + std::string(port)), std::string::npos)
        << msg;
  }
  EXPECT_EQ(world_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65535"}}), "");
}

// A launcher that set only half of the pair must not be mistaken for a single process.
TEST(World, RankWithoutWorldSizeIsAnError) {
  std::string msg = world_error({{"RANK", "1"}});
  EXPECT_NE(msg.find("WORLD_SIZE: is not set, but RANK is"), std::string::npos) << msg;
  msg = world_error({{"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}});
  EXPECT_NE(msg.find("RANK: is not set, but WORLD_SIZE is"), std::string::npos) << msg;
}

TEST(World, LocalRankOutsideTheNodeIsAnError) {
  std::string msg = world_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}, {"LOCAL_RANK", "-3"}});
  EXPECT_NE(msg.find("local rank -3"), std::string::npos) << msg;
  msg = world_error(
      {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "1"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("0..1"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ddplab::distributed
