// ddplab workers under a real one-node SLURM (scripts/slurm-local.sh: Debian's slurmctld, slurmd and
// munge on localhost, as root): `srun` and `sbatch` start `ddplab worker`, which finds its world in
// SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS and SLURM_JOB_NODELIST and its port from SLURM_JOB_ID.
// The cluster starts once per suite in a temp dir (its own munge key, ports and state) and stops
// at the end; a watchdog stops it if the test process dies first. Where it cannot start (no
// packages, not root), the tests skip with the reason, or fail with it when DDPLAB_REQUIRE_SLURM=1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(DDPLAB_SOURCE_DIR) + "/scripts/slurm-local.sh";

// A shell prefix that clears what a launcher around the test (an outer SLURM job, torchrun) set,
// so that srun asks our cluster for a new allocation and the worker sees only its own world.
std::string clean_env(const fs::path& conf) {
  return fmt::format(
      "for v in $(env | sed -n 's/^\\(SLURM_[A-Za-z0-9_]*\\)=.*/\\1/p'); do unset $v; done; "
      "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID "
      "TORCHELASTIC_RESTART_COUNT DDPLAB_LAUNCHER DDPLAB_RUN_DIR DDPLAB_RESUME DDPLAB_FORCE; "
      "export SLURM_CONF='{}' OMP_NUM_THREADS=1; ",
      conf.string());
}

// A TCP socket listening on `port` on every address while the object lives (-1: could not).
class PortHolder {
 public:
  explicit PortHolder(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (fd_ >= 0 && (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 4) != 0)) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~PortHolder() {
    if (fd_ >= 0) ::close(fd_);
  }
  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;
  bool holds() const { return fd_ >= 0; }

 private:
  int fd_;
};

class Slurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    // munged wants every directory above its socket searchable by all (mkdtemp makes 0700).
    fs::permissions(dir_->path(), fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
    cluster_ = dir_->path() / "cluster";
    auto r = run_command(fmt::format("DDPLAB_SLURM_OWNER_PID={} timeout -k 5 300 {} start {}", ::getpid(), kScript,
                                     cluster_.string()));
    if (r.exit_code != 0)
      unavailable_ = fmt::format("no SLURM cluster: `{} start` exited with {}:\n{}", kScript, r.exit_code, r.output);
  }

  static void TearDownTestSuite() {
    if (fs::exists(cluster_ / "slurm.conf")) {
      auto r = run_command(fmt::format("timeout -k 5 120 {} stop {}", kScript, cluster_.string()));
      EXPECT_EQ(r.exit_code, 0) << "stopping the cluster in " << cluster_ << ": " << r.output;
    }
    dir_.reset();
  }

  void SetUp() override {
    if (unavailable_.empty()) return;
    const char* require = std::getenv("DDPLAB_REQUIRE_SLURM");
    if (require != nullptr && std::string(require) == "1") GTEST_FAIL() << "DDPLAB_REQUIRE_SLURM=1, but " << unavailable_;
    GTEST_SKIP() << unavailable_ << "\n(set DDPLAB_REQUIRE_SLURM=1 to make this a failure)";
  }

  // Runs `command` as a client of the cluster, killed after `seconds`.
  static CommandResult slurm(const std::string& command, int seconds = 60) {
    return run_command(fmt::format("{}timeout -k 5 {} sh -c '{}'", clean_env(cluster_ / "slurm.conf"), seconds, command));
  }

  // Submits `script` with sbatch (extra options `options`) and returns the job id.
  static int submit(const fs::path& script, const std::string& options = "") {
    auto r = slurm(fmt::format("sbatch --parsable {} {}", options, script.string()));
    std::smatch m;  // "<id>" or "<id>;<cluster>", after any warnings
    const std::regex id("(\\d+)(;\\S+)?\\s*$");
    EXPECT_TRUE(r.exit_code == 0 && std::regex_search(r.output, m, id)) << r.output;
    return r.exit_code == 0 && !m.empty() ? std::stoi(m[1]) : -1;
  }

  // Polls `scontrol show job` until job `id` has ended (or `seconds` passed); its final JobState.
  static std::string wait_for_job(int id, int seconds = 60) {
    const std::regex state("JobState=([A-Z_]+)");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = slurm(fmt::format("scontrol -o show job {}", id), 10);
      std::smatch m;
      if (std::regex_search(r.output, m, state)) last = m[1];
      if (!last.empty() && last != "PENDING" && last != "CONFIGURING" && last != "RUNNING" && last != "COMPLETING")
        return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "job " << id << " still " << last << " after " << seconds << " s";
    return last;
  }

  // The jobcomp/filetxt record of job `id` (empty when there is none).
  static std::string job_record(int id) {
    std::istringstream lines(read_file(cluster_ / "jobcomp.txt"));
    std::string line;
    while (std::getline(lines, line))
      if (line.rfind(fmt::format("JobId={} ", id), 0) == 0) return line;
    return "";
  }

  // A batch script running `srun ddplab worker <spec>` on 2 tasks, its output in <dir>/job.out.
  static fs::path write_batch_script(const Workspace& ws, const std::string& spec_path) {
    fs::path script = ws.dir().path() / "job.sh";
    write_file(script, fmt::format("#!/bin/sh\n"
                                   "#SBATCH --job-name=ddplab-sbatch\n"
                                   "#SBATCH --ntasks=2\n"
                                   "#SBATCH --time=2\n"
                                   "#SBATCH --output={}\n"
                                   "srun --kill-on-bad-exit=1 {} worker {}\n",
                                   (ws.dir().path() / "job.out").string(), DDPLAB_BIN, spec_path));
    return script;
  }

  // A tiny spec: mlp on 2,000 + 500 generated MNIST-format images, 2 epochs, 2 replicas.
  static nlohmann::json tiny_spec(const Workspace& ws, const std::string& name) {
    auto spec = ws.base_spec(name);
    spec["replicas"]["count"] = 2;
    spec["replicas"]["threads"] = 1;
    spec["replicas"]["timeout_s"] = 20;
    return spec;
  }

  static std::unique_ptr<TempDir> dir_;
  static fs::path cluster_;
  static std::string unavailable_;
};

std::unique_ptr<TempDir> Slurm::dir_;
fs::path Slurm::cluster_;
std::string Slurm::unavailable_;

TEST_F(Slurm, SrunWorkersGiveTheSameMetricsAsDdplabsLauncher) {
  Workspace ws(2000, 500);
  auto spec = tiny_spec(ws, "launchers");
  auto own = run_spec(ws, spec, "own");
  ASSERT_EQ(own.command.exit_code, 0) << own.command.output;
  spec["name"] = "srun";
  auto path = ws.write_spec(spec, "srun.json");
  auto r = slurm(fmt::format("srun --job-name=ddplab-srun --ntasks=2 --time=2 --kill-on-bad-exit=1 {} worker {}",
                             DDPLAB_BIN, path));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::path dir = ws.out() / "srun" / "seed=3";
  auto records = read_records(dir);
  ASSERT_EQ(records.size(), 2u) << r.output;
  ASSERT_EQ(records.size(), own.records.size());
  for (size_t e = 0; e < records.size(); ++e) {
    EXPECT_EQ(records[e]["replicas"], 2);
    for (const char* k : {"train_loss", "train_acc", "test_loss", "test_acc", "lr", "step"})
      EXPECT_EQ(records[e][k], own.records[e][k]) << k << " in epoch " << e + 1;
  }
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["launcher"], "slurm");
  EXPECT_EQ(manifest["status"], "done");
}

TEST_F(Slurm, AnSbatchJobOfWorkersCompletesWithADoneRun) {
  Workspace ws(2000, 500);
  auto spec = tiny_spec(ws, "sbatch");
  auto script = write_batch_script(ws, ws.write_spec(spec, "sbatch.json"));
  int id = submit(script);
  ASSERT_GT(id, 0);
  EXPECT_EQ(wait_for_job(id), "COMPLETED") << read_file(ws.dir().path() / "job.out");
  EXPECT_NE(job_record(id).find("JobState=COMPLETED"), std::string::npos) << job_record(id);
  EXPECT_NE(job_record(id).find("ProcCnt=2"), std::string::npos) << job_record(id);
  fs::path dir = ws.out() / "sbatch" / "seed=3";
  EXPECT_EQ(read_records(dir).size(), 2u);
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["launcher"], "slurm");
  EXPECT_EQ(manifest["status"], "done");
}

// The master is the first host of SLURM_JOB_NODELIST and the port 12910 + SLURM_JOB_ID % 20000:
// a held job tells its id; with that port taken, rank 0 cannot host the store and says where.
TEST_F(Slurm, WorkersRendezvousAtTheNodelistsFirstHostOnThePortOfTheirJobId) {
  Workspace ws(512, 200);
  auto spec = tiny_spec(ws, "port");
  spec["replicas"]["timeout_s"] = 5;
  auto script = write_batch_script(ws, ws.write_spec(spec, "port.json"));
  int id = submit(script, "--hold");
  ASSERT_GT(id, 0);
  const int port = 12910 + id % 20000;
  PortHolder taken(port);
  if (!taken.holds()) {
    slurm(fmt::format("scancel {}", id));
    GTEST_SKIP() << "port " << port << " of job " << id << " is in use by another program";
  }
  auto release = slurm(fmt::format("scontrol release {}", id));
  ASSERT_EQ(release.exit_code, 0) << release.output;
  EXPECT_EQ(wait_for_job(id), "FAILED");
  auto out = read_file(ws.dir().path() / "job.out");
  EXPECT_NE(out.find(fmt::format("rendezvous store at localhost:{}", port)), std::string::npos) << out;
}

}  // namespace
}  // namespace ddplab::testing
