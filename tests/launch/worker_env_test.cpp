// The worker environment contract: what the launcher writes, the worker reads back unchanged,
// and world discovery sees the world the launcher meant.
#include "ddplab/launch/worker_env.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "ddplab/distributed/world.h"
#include "test_util.h"

namespace ddplab::launch {
namespace {

WorkerEnv third_of_four() {
  WorkerEnv env;
  env.rank = 2;
  env.world_size = 4;
  env.local_rank = 2;
  env.local_world_size = 4;
  env.master_addr = "127.0.0.1";
  env.master_port = 29517;
  env.restart_count = 1;
  env.launcher = true;
  env.run_dir = "/tmp/out/exp/seed=3";
  env.resume = true;
  env.force = false;
  return env;
}

TEST(WorkerEnv, WhatTheLauncherWritesTheWorkerReadsBack) {
  const WorkerEnv env = third_of_four();
  EXPECT_EQ(parse_worker_env(to_environment(env)), env);
  WorkerEnv other = env;
  other.force = true;
  other.resume = false;
  other.run_dir.clear();
  other.launcher = false;
  EXPECT_EQ(parse_worker_env(to_environment(other)), other);
  EXPECT_NE(parse_worker_env(to_environment(other)), env);
}

TEST(WorkerEnv, EveryVariableOfTheContractIsWritten) {
  const auto vars = to_environment(third_of_four());
  for (const auto& name : worker_env_names()) EXPECT_EQ(vars.count(name), 1u) << name;
  EXPECT_EQ(vars.size(), worker_env_names().size());
  EXPECT_EQ(vars.at("DDPLAB_RESUME"), "1");
  EXPECT_EQ(vars.at("DDPLAB_LAUNCHER"), "1");
  EXPECT_EQ(vars.at("MASTER_PORT"), "29517");
}

TEST(WorkerEnv, UnsetOrEmptyVariablesReadAsTheDefaults) {
  EXPECT_EQ(parse_worker_env({}), WorkerEnv{});
  EXPECT_EQ(parse_worker_env({{"DDPLAB_RUN_DIR", ""}, {"DDPLAB_RESUME", ""}, {"RANK", ""}}), WorkerEnv{});
}

TEST(WorkerEnv, AMalformedValueIsAnErrorNamingTheVariable) {
  using ddplab::testing::error_of;
  EXPECT_EQ(error_of([] { parse_worker_env({{"RANK", "two"}}); }),
            "environment variable RANK: expected an integer, got \"two\"");
  EXPECT_EQ(error_of([] { parse_worker_env({{"MASTER_PORT", "29500x"}}); }),
            "environment variable MASTER_PORT: expected an integer, got \"29500x\"");
  EXPECT_EQ(error_of([] { parse_worker_env({{"DDPLAB_RESUME", "yes"}}); }),
            "environment variable DDPLAB_RESUME: must be 0 or 1, got \"yes\"");
  EXPECT_EQ(error_of([] { parse_worker_env({{"DDPLAB_FORCE", "true"}}); }),
            "environment variable DDPLAB_FORCE: must be 0 or 1, got \"true\"");
  EXPECT_EQ(error_of([] { parse_worker_env({{"DDPLAB_LAUNCHER", "0"}}); }),
            "environment variable DDPLAB_LAUNCHER: must be 1 when set, got \"0\"");
}

TEST(WorkerEnv, AWorkersEnvironmentReplacesInheritedContractVariables) {
  std::vector<std::string> inherited = {"PATH=/usr/bin", "RANK=7", "DDPLAB_FORCE=1", "DDPLAB_RUN_DIRX=keep"};
  std::vector<char*> raw;
  for (auto& s : inherited) raw.push_back(s.data());
  raw.push_back(nullptr);
  const auto env = worker_environment(raw.data(), third_of_four());
  auto has = [&](const std::string& kv) { return std::find(env.begin(), env.end(), kv) != env.end(); };
  EXPECT_TRUE(has("PATH=/usr/bin"));
  EXPECT_TRUE(has("DDPLAB_RUN_DIRX=keep")) << "only the contract's own names are replaced";
  EXPECT_TRUE(has("RANK=2"));
  EXPECT_FALSE(has("RANK=7"));
  EXPECT_TRUE(has("DDPLAB_FORCE=0"));
  EXPECT_FALSE(has("DDPLAB_FORCE=1"));
  EXPECT_TRUE(has("DDPLAB_RUN_DIR=/tmp/out/exp/seed=3"));
}

TEST(WorkerEnv, WorldDiscoverySeesTheWorldTheLauncherMeant) {
  const WorkerEnv env = third_of_four();
  const auto world = distributed::discover_world(to_environment(env));
  EXPECT_EQ(world.rank, 2);
  EXPECT_EQ(world.size, 4);
  EXPECT_EQ(world.local_rank, 2);
  EXPECT_EQ(world.local_size, 4);
  EXPECT_EQ(world.master_port, 29517);
  EXPECT_EQ(world.restart_count, 1);
  EXPECT_EQ(world.launcher, "ddplab");
  EXPECT_TRUE(world.agent_store);
}

}  // namespace
}  // namespace ddplab::launch
