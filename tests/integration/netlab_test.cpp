// Runs across hosts: two emulated hosts (scripts/netlab.sh: network namespaces joined by one
// bridge, each with its own address, link and host name, and no route but its link) run one job
// as two machines of a cluster do. The hosts share this machine's file system, as nodes share a
// cluster's: the run directory and the data are where the spec says on both.
// The lab starts once per suite and is taken down at the end (and by a watchdog if the test
// process dies first). Where it cannot start (not root, no namespaces), the tests skip with the
// reason, or fail with it when DDPLAB_REQUIRE_NETLAB=1 (scripts/test.sh sets it).
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/rundir/run_log.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(DDPLAB_SOURCE_DIR) + "/scripts/netlab.sh";
constexpr int kPort = 29511;
// What a rank may take beyond replicas.timeout_s to end after a fault: its exit, the store's and
// the process group's teardown, and this test's polling.
constexpr double kMarginS = 3.0;

// The records without the fields that time or load the machine (EpochRecord::machine_fields).
std::vector<nlohmann::json> training_fields(std::vector<nlohmann::json> records) {
  for (auto& r : records)
    for (const auto& f : rundir::EpochRecord::machine_fields()) r.erase(f);
  return records;
}

class NetLab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lab_ = fmt::format("nl{}", ::getpid() % 100000);
    subnet_ = fmt::format("10.77.{}", 1 + ::getpid() % 250);
    auto r = run_command(fmt::format("timeout -k 5 60 {} up 2 --owner {}", script(), ::getpid()));
    if (r.exit_code != 0)
      unavailable_ = fmt::format("no lab: `netlab.sh up 2` exited with {}:\n{}", r.exit_code, r.output);
  }

  static void TearDownTestSuite() {
    if (!unavailable_.empty()) return;
    auto r = run_command(fmt::format("timeout -k 5 60 {} down", script()));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }

  void SetUp() override {
    if (unavailable_.empty()) return;
    if (required_by_environment("DDPLAB_REQUIRE_NETLAB"))
      GTEST_FAIL() << "DDPLAB_REQUIRE_NETLAB=1, but " << unavailable_;
    GTEST_SKIP() << unavailable_ << "\n(set DDPLAB_REQUIRE_NETLAB=1 to make this a failure)";
  }

  static std::string script() { return fmt::format("{} --lab {} --subnet {}", kScript, lab_, subnet_); }
  static std::string address(int host) { return fmt::format("{}.{}", subnet_, host + 1); }
  static std::string host_name(int host) { return fmt::format("{}-h{}", lab_, host); }
  static CommandResult lab(const std::string& command) { return run_command(script() + " " + command); }

  // `command` on `host`, with nothing of an outer launcher's world, killed after `seconds`.
  static std::string on_host(int host, const std::string& command, int seconds = 120) {
    return fmt::format(
        "{} exec {} env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "
        "-u TORCHELASTIC_RUN_ID -u TORCHELASTIC_RESTART_COUNT -u DDPLAB_LAUNCHER -u DDPLAB_RUN_DIR -u DDPLAB_RESUME "
        "-u GLOO_SOCKET_IFNAME -u SLURM_PROCID -u SLURM_NTASKS OMP_NUM_THREADS=1 timeout -k 5 {} sh -c '{}'",
        script(), host, seconds, command);
  }

  // `ddplab worker <spec>` as rank `rank` of `world` on `host`, rendezvous at host 0.
  static std::string worker(int host, int rank, int world, const std::string& spec, const std::string& env = "") {
    return on_host(host, fmt::format("RANK={} WORLD_SIZE={} MASTER_ADDR={} MASTER_PORT={} {} {} worker {}", rank, world,
                                     address(0), kPort, env, DDPLAB_BIN, spec));
  }

  // Every command at once (one per host); their results in the same order.
  static std::vector<CommandResult> at_once(const std::vector<std::string>& commands) {
    std::vector<std::future<CommandResult>> running;
    for (const auto& c : commands) running.push_back(std::async(std::launch::async, run_command, c));
    std::vector<CommandResult> out;
    for (auto& r : running) out.push_back(r.get());
    return out;
  }

  static std::string lab_, subnet_, unavailable_;
};
std::string NetLab::lab_, NetLab::subnet_, NetLab::unavailable_;

// The same 2-replica run on loopback (ddplab's own launcher), for the records a lab run must equal.
std::vector<nlohmann::json> loopback_records(const Workspace& ws, nlohmann::json spec) {
  spec["name"] = "loopback";
  spec["replicas"]["count"] = 2;
  auto r = run_spec(ws, spec, "loopback");
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  return training_fields(r.records);
}

TEST_F(NetLab, WorkersOnTwoHostsGiveTheRecordsOfLoopbackWithOrWithoutGlooSocketIfname) {
  Workspace ws;
  auto spec = ws.base_spec("hosts");
  spec["replicas"]["count"] = 2;
  spec["replicas"]["timeout_s"] = 20;
  const auto expected = loopback_records(ws, spec);
  for (const std::string env : {"", "GLOO_SOCKET_IFNAME=eth0"}) {
    spec["name"] = env.empty() ? "routed" : "ifname";
    const auto path = ws.write_spec(spec, spec["name"].get<std::string>() + ".json");
    auto r = at_once({worker(0, 0, 2, path, env), worker(1, 1, 2, path, env)});
    ASSERT_EQ(r[0].exit_code, 0) << env << "\n" << r[0].output;
    ASSERT_EQ(r[1].exit_code, 0) << env << "\n" << r[1].output;
    const fs::path dir = ws.out() / spec["name"].get<std::string>() / "seed=3";
    EXPECT_EQ(training_fields(read_records(dir)), expected) << env;
    auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
    ASSERT_EQ(manifest["ranks"].size(), 2u) << manifest.dump(2);
    for (int rank : {0, 1}) {
      EXPECT_EQ(manifest["ranks"][rank]["host"], host_name(rank)) << manifest.dump(2);
      EXPECT_EQ(manifest["ranks"][rank]["address"], address(rank)) << manifest.dump(2);
    }
  }
}

TEST_F(NetLab, ALoopbackDeviceWithARemoteMasterIsRefusedAtOnce) {
  Workspace ws;
  auto spec = ws.base_spec("trap");
  spec["replicas"]["count"] = 2;
  const auto path = ws.write_spec(spec);
  auto r = run_command(worker(1, 1, 2, path, "GLOO_SOCKET_IFNAME=lo"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_LT(r.seconds, 5.0) << r.output;
  for (const std::string& part :
       {std::string("rank 1 on host ") + host_name(1), std::string("loopback address 127.0.0.1"),
        std::string("MASTER_ADDR is ") + address(0), std::string("set GLOO_SOCKET_IFNAME")})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  auto missing = run_command(worker(1, 1, 2, path, "GLOO_SOCKET_IFNAME=eth9"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("has no interface \"eth9\""), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("its interfaces: lo, eth0"), std::string::npos) << missing.output;
}

// torchrun's multi-node recipe, one agent per host, its c10d rendezvous on host 0. The lab's host
// names resolve nowhere (as in many containers), so torchrun cannot tell by itself which agent
// hosts the rendezvous store (is_host says so), and each agent must give its address to the others
// (--local-addr) instead of its host name (docs/multi-node.md).
TEST_F(NetLab, TorchrunOnTwoHostsGivesTheRecordsOfLoopback) {
  const std::string torchrun = std::string(DDPLAB_VENV_BIN) + "/torchrun";
  if (!fs::exists(torchrun)) GTEST_SKIP() << "no torchrun in " << DDPLAB_VENV_BIN;
  Workspace ws;
  auto spec = ws.base_spec("torchrun");
  spec["replicas"]["count"] = 2;
  const auto path = ws.write_spec(spec);
  auto agent = [&](int host) {
    return on_host(
        host,
        fmt::format("{} --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint {}:29400 "
                    "--rdzv-id lab --rdzv-conf is_host={} --local-addr {} --max-restarts 0 --no-python {} worker {}",
                    torchrun, address(0), host == 0 ? 1 : 0, address(host), DDPLAB_BIN, path),
        90);
  };
  auto r = at_once({agent(0), agent(1)});
  ASSERT_EQ(r[0].exit_code, 0) << r[0].output;
  ASSERT_EQ(r[1].exit_code, 0) << r[1].output;
  const fs::path dir = ws.out() / "torchrun" / "seed=3";
  EXPECT_EQ(training_fields(read_records(dir)), loopback_records(ws, spec));
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["launcher"], "torchrun");
  ASSERT_EQ(manifest["ranks"].size(), 2u) << manifest.dump(2);
  EXPECT_NE(manifest["ranks"][0]["host"], manifest["ranks"][1]["host"]) << manifest.dump(2);
}

// `ddplab run --hosts` on host 0 starts rank 0 there and rank 1 on host 1 through the remote
// command (the lab's `exec`, as ssh on a cluster), its store reached at host 0's address; its
// records are those of loopback, its ranks' logs come back to the launcher's run directory.
TEST_F(NetLab, DdplabRunAcrossHostsGivesTheRecordsOfLoopback) {
  Workspace ws;
  auto spec = ws.base_spec("hostfile");
  spec["replicas"]["count"] = 2;
  const auto path = ws.write_spec(spec);
  const fs::path hostfile = ws.dir().path() / "hosts.txt";
  write_file(hostfile, fmt::format("{} slots=1\n{} slots=1\n", host_name(0), host_name(1)));
  auto r = run_command(on_host(0, fmt::format("{} run {} --hosts {} --remote \"{} exec {{host}}\" --master-addr {}",
                                              DDPLAB_BIN, path, hostfile.string(), script(), address(0))));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path dir = ws.out() / "hostfile" / "seed=3";
  EXPECT_EQ(training_fields(read_records(dir)), loopback_records(ws, spec));
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  ASSERT_EQ(manifest["ranks"].size(), 2u) << manifest.dump(2);
  for (int rank : {0, 1}) EXPECT_EQ(manifest["ranks"][rank]["host"], host_name(rank)) << manifest.dump(2);
}

// A run of many short epochs across the two hosts, long enough to meet a fault mid-run.
struct LongRun {
  nlohmann::json spec;
  std::string path;
  fs::path dir;
};
LongRun long_run(const Workspace& ws, const std::string& name, double timeout_s) {
  LongRun run;
  run.spec = ws.base_spec(name);
  run.spec["replicas"]["count"] = 2;
  run.spec["replicas"]["timeout_s"] = timeout_s;
  run.spec["epochs"] = 40;
  run.path = ws.write_spec(run.spec, name + ".json");
  run.dir = ws.out() / name / "seed=3";
  return run;
}

// Waits until `dir` holds `n` epoch records (or `seconds` passed).
bool wait_for_records(const fs::path& dir, size_t n, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (read_records(dir).size() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What a fault left: each rank's result and its exit time after the fault.
struct FaultEnd {
  std::vector<CommandResult> ranks;
  std::vector<double> exit_after_fault_s;
};

// Starts both ranks of `run`, waits for 2 epoch records, applies `fault` (a netlab command) and
// waits for both ranks to end.
FaultEnd fault_after_two_epochs(const LongRun& run, const std::function<std::string(int, int)>& worker_cmd,
                                const std::function<void()>& fault) {
  std::vector<std::future<CommandResult>> ranks;
  for (int r : {0, 1}) ranks.push_back(std::async(std::launch::async, run_command, worker_cmd(r, r)));
  EXPECT_TRUE(wait_for_records(run.dir, 2, 60)) << "the run did not reach epoch 2";
  const auto at = std::chrono::steady_clock::now();
  fault();
  FaultEnd end;
  for (auto& r : ranks) {
    end.ranks.push_back(r.get());
    end.exit_after_fault_s.push_back(seconds_since(at));
    std::cout << fmt::format("rank {} exited with {} {:.2f} s after the fault\n", end.ranks.size() - 1,
                             end.ranks.back().exit_code, end.exit_after_fault_s.back());
  }
  return end;
}

// After a fault: the run directory holds whole records and says it failed; no worker is left.
void expect_contained(const LongRun& run, const std::string& name) {
  const auto records = read_records(run.dir);  // throws on a torn line
  EXPECT_GE(records.size(), 2u);
  EXPECT_LT(records.size(), 40u);
  auto manifest = nlohmann::json::parse(read_file(run.dir / "manifest.json"));
  EXPECT_EQ(manifest["status"], "failed") << manifest.dump(2);
  EXPECT_FALSE(process_with_argument_exists(run.path)) << name << ": a worker was left behind";
}

TEST_F(NetLab, ACutLinkEndsBothRanksWithinTheTimeoutAndTheSameCommandResumesExactly) {
  Workspace ws(4096, 100);
  const double timeout_s = 4;
  auto run = long_run(ws, "cut", timeout_s);
  auto worker_cmd = [&](int host, int rank) { return worker(host, rank, 2, run.path); };
  auto end = fault_after_two_epochs(run, worker_cmd, [&] { ASSERT_EQ(lab("link 1 down").exit_code, 0); });
  for (int r : {0, 1}) {
    EXPECT_NE(end.ranks[r].exit_code, 0) << end.ranks[r].output;
    EXPECT_LT(end.exit_after_fault_s[r], timeout_s + kMarginS) << "rank " << r << "\n" << end.ranks[r].output;
    EXPECT_NE(end.ranks[r].output.find(fmt::format("rank {} on host {}", r, host_name(r))), std::string::npos)
        << end.ranks[r].output;
  }
  expect_contained(run, "cut");
  ASSERT_EQ(lab("link 1 up").exit_code, 0);
  auto resumed = at_once({worker(0, 0, 2, run.path, "DDPLAB_RESUME=1"), worker(1, 1, 2, run.path, "DDPLAB_RESUME=1")});
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].output;
  ASSERT_EQ(resumed[1].exit_code, 0) << resumed[1].output;
  EXPECT_EQ(training_fields(read_records(run.dir)), loopback_records(ws, run.spec));
}

TEST_F(NetLab, ALostHostEndsTheSurvivorWithinTheTimeoutNamingThePeer) {
  Workspace ws(4096, 100);
  const double timeout_s = 4;
  auto run = long_run(ws, "lost", timeout_s);
  auto worker_cmd = [&](int host, int rank) { return worker(host, rank, 2, run.path); };
  auto end = fault_after_two_epochs(run, worker_cmd, [&] { ASSERT_EQ(lab("kill 1").exit_code, 0); });
  EXPECT_NE(end.ranks[0].exit_code, 0) << end.ranks[0].output;
  EXPECT_LT(end.exit_after_fault_s[0], timeout_s + kMarginS) << end.ranks[0].output;
  EXPECT_NE(end.ranks[0].output.find(fmt::format("rank 0 on host {}", host_name(0))), std::string::npos)
      << end.ranks[0].output;
  expect_contained(run, "lost");
}

TEST_F(NetLab, AnUnreachableRendezvousHostEndsTheRankWithinTheTimeout) {
  Workspace ws;
  auto spec = ws.base_spec("unreachable");
  spec["replicas"]["count"] = 2;
  const double timeout_s = 4;
  spec["replicas"]["timeout_s"] = timeout_s;
  const auto path = ws.write_spec(spec);
  ASSERT_EQ(lab("link 0 down").exit_code, 0);
  auto r = run_command(worker(1, 1, 2, path));
  ASSERT_EQ(lab("link 0 up").exit_code, 0);
  EXPECT_NE(r.exit_code, 0) << r.output;
  // c10d's store client tries once more at its deadline, and a connect to a host whose link is
  // down takes the kernel's 3 s of ARP to fail (errno 113, no route to host).
  EXPECT_LT(r.seconds, timeout_s + kMarginS + 3) << r.output;
  EXPECT_NE(r.output.find(fmt::format("rank 1 on host {}: cannot reach the rendezvous store at {}:{}", host_name(1),
                                      address(0), kPort)),
            std::string::npos)
      << r.output;
}

TEST_F(NetLab, ASlowLinkIsSlowNotDead) {
  Workspace ws;
  auto spec = ws.base_spec("slow");
  spec["replicas"]["count"] = 2;
  spec["replicas"]["timeout_s"] = 20;
  const auto path = ws.write_spec(spec);
  ASSERT_EQ(lab("rate 1 1mbit").exit_code, 0);
  auto r = at_once({worker(0, 0, 2, path), worker(1, 1, 2, path)});
  ASSERT_EQ(lab("rate 1 off").exit_code, 0);
  ASSERT_EQ(r[0].exit_code, 0) << r[0].output;
  ASSERT_EQ(r[1].exit_code, 0) << r[1].output;
  EXPECT_EQ(training_fields(read_records(ws.out() / "slow" / "seed=3")), loopback_records(ws, spec));
}

}  // namespace
}  // namespace ddplab::testing
