// ddplab workers under a real one-node SLURM (scripts/slurm-local.sh: Debian's slurmctld, slurmd and
// munge on localhost, as root): `srun` and `sbatch` start `ddplab worker`, which finds its world in
// SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS and SLURM_JOB_NODELIST and its port from SLURM_JOB_ID.
// `ddplab run --launcher slurm` submits a sweep's runs as batch jobs and a report job after them
// (runner/slurm.h); `ddplab status` reads them back.
// The cluster starts once per suite in a temp dir (its own munge key, ports and state) and stops
// at the end; a watchdog stops it if the test process dies first. Where it cannot start (no
// packages, not root), the tests skip with the reason, or fail with it when DDPLAB_REQUIRE_SLURM=1.
#include <arpa/inet.h>
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
#include <gtest/gtest.h>

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
    auto r = run_command(
        fmt::format("DDPLAB_SLURM_OWNER_PID={} timeout -k 5 300 {} start {}", ::getpid(), kScript, cluster_.string()));
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
    if (required_by_environment("DDPLAB_REQUIRE_SLURM")) GTEST_FAIL() << "DDPLAB_REQUIRE_SLURM=1, but " << unavailable_;
    GTEST_SKIP() << unavailable_ << "\n(set DDPLAB_REQUIRE_SLURM=1 to make this a failure)";
  }

  // Runs `command` as a client of the cluster, killed after `seconds`.
  static CommandResult slurm(const std::string& command, int seconds = 60) {
    return run_command(
        fmt::format("{}timeout -k 5 {} sh -c '{}'", clean_env(cluster_ / "slurm.conf"), seconds, command));
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

  // A 4-run sweep of tiny runs (1 epoch): replicas.count 1 and 2, seeds 3 and 4.
  static std::string sweep_spec(const Workspace& ws, const std::string& name) {
    auto spec = tiny_spec(ws, name);
    spec["epochs"] = 1;
    spec["sweep"] = {{"replicas.count", {1, 2}}};
    spec["repeats"] = 2;
    return ws.write_spec(spec, name + ".json");
  }

  static std::vector<std::string> sweep_run_ids() {
    return {"replicas.count=1,seed=3", "replicas.count=1,seed=4", "replicas.count=2,seed=3", "replicas.count=2,seed=4"};
  }

  // The job id recorded in `dir`'s slurm-job.json (-1 without one).
  static int recorded_job(const fs::path& dir) {
    if (!fs::exists(dir / "slurm-job.json")) return -1;
    return std::stoi(nlohmann::json::parse(read_file(dir / "slurm-job.json"))["job_id"].get<std::string>());
  }

  // The report job's id in what `ddplab run --launcher slurm` printed (-1 without one).
  static int report_job(const std::string& output) {
    std::smatch m;
    return std::regex_search(output, m, std::regex("report job (\\d+)")) ? std::stoi(m[1]) : -1;
  }

  static size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  // The epoch records of `got` and `want` hold the same metrics, exactly.
  static void expect_same_metrics(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t e = 0; e < got.size(); ++e)
      for (const char* k : {"train_loss", "train_acc", "test_loss", "test_acc", "lr", "step"})
        EXPECT_EQ(got[e][k], want[e][k]) << k << " in epoch " << e + 1;
  }

  static std::string status_of(const fs::path& dir) {
    return nlohmann::json::parse(read_file(dir / "manifest.json"))["status"].get<std::string>();
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
  for (const auto& record : records) EXPECT_EQ(record["replicas"], 2);
  expect_same_metrics(records, own.records);
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

TEST_F(Slurm, ASweepSubmittedWithTheSlurmLauncherCompletesWithItsReportJob) {
  Workspace ws(512, 200);
  const auto spec = sweep_spec(ws, "sbatch-sweep");
  auto r = slurm(fmt::format("{} run {} --launcher slurm", DDPLAB_BIN, spec));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, ": submitted job "), 4u) << r.output;
  const int report = report_job(r.output);
  ASSERT_GT(report, 0) << r.output;
  EXPECT_EQ(wait_for_job(report, 240), "COMPLETED") << read_file(ws.out() / "sbatch-sweep" / "slurm-job.out");
  for (const auto& id : sweep_run_ids()) {
    const fs::path dir = ws.out() / "sbatch-sweep" / id;
    const int job = recorded_job(dir);
    ASSERT_GT(job, 0) << id;
    EXPECT_EQ(wait_for_job(job), "COMPLETED") << id << ": " << read_file(dir / "slurm-job.out");
    EXPECT_EQ(read_records(dir).size(), 1u) << id;
    ASSERT_TRUE(fs::exists(dir / "manifest.json")) << id << ": " << read_file(dir / "slurm-job.out");
    auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
    EXPECT_EQ(manifest["status"], "done") << id;
    EXPECT_EQ(manifest["launcher"], "slurm") << id;
    EXPECT_EQ(manifest["replicas"], id[15] - '0') << id;
    const std::string procs = fmt::format("ProcCnt={}", id[15] - '0');
    EXPECT_NE(job_record(job).find(procs), std::string::npos) << id << ": " << job_record(job);
  }
  EXPECT_TRUE(fs::exists(ws.out() / "sbatch-sweep" / "report.html"));
  auto status = slurm(fmt::format("{} status {}", DDPLAB_BIN, (ws.out() / "sbatch-sweep").string()));
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_EQ(count_of(status.output, "COMPLETED"), 5u) << "4 runs and the report job:\n" << status.output;
  EXPECT_NE(status.output.find("ddplab: 4 runs: 4 done; report job "), std::string::npos) << status.output;
  // Everything is done: the same command again submits nothing.
  auto again = slurm(fmt::format("{} run {} --launcher slurm", DDPLAB_BIN, spec));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to submit"), std::string::npos) << again.output;
}

TEST_F(Slurm, ResubmittingAfterAScancelSubmitsOnlyTheCancelledRun) {
  Workspace ws(512, 200);
  const auto spec = sweep_spec(ws, "resubmit");
  const fs::path experiment = ws.out() / "resubmit";
  // Held, so that the cancelled job surely never started; the others are released after it.
  auto r = slurm(fmt::format("{} run {} --launcher slurm --sbatch-option=--hold", DDPLAB_BIN, spec));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ids = sweep_run_ids();
  const fs::path cancelled_dir = experiment / ids[2];
  const int cancelled = recorded_job(cancelled_dir);
  const int report = report_job(r.output);
  ASSERT_GT(cancelled, 0);
  ASSERT_GT(report, 0) << r.output;
  ASSERT_EQ(slurm(fmt::format("scancel {}", cancelled)).exit_code, 0);
  std::string others = fmt::format("{}", report);
  for (const auto& id : ids)
    if (experiment / id != cancelled_dir) others += fmt::format(",{}", recorded_job(experiment / id));
  auto release = slurm(fmt::format("scontrol release {}", others));
  ASSERT_EQ(release.exit_code, 0) << release.output;
  EXPECT_EQ(wait_for_job(report, 240), "COMPLETED") << read_file(experiment / "slurm-job.out");
  EXPECT_EQ(wait_for_job(cancelled), "CANCELLED");
  EXPECT_FALSE(fs::exists(cancelled_dir / "manifest.json"));
  auto status = slurm(fmt::format("{} status {}", DDPLAB_BIN, experiment.string()));
  EXPECT_NE(status.output.find("ddplab: 4 runs: 3 done, 1 not started"), std::string::npos) << status.output;

  auto again = slurm(fmt::format("{} run {} --launcher slurm", DDPLAB_BIN, spec));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count_of(again.output, ": submitted job "), 1u) << again.output;
  EXPECT_EQ(count_of(again.output, ": done"), 3u) << again.output;
  EXPECT_NE(again.output.find(fmt::format("{}: submitted job ", ids[2])), std::string::npos) << again.output;
  const int resubmitted = recorded_job(cancelled_dir);
  EXPECT_NE(resubmitted, cancelled);
  const int report2 = report_job(again.output);
  ASSERT_GT(report2, 0) << again.output;
  EXPECT_EQ(wait_for_job(report2, 240), "COMPLETED") << read_file(experiment / "slurm-job.out");
  EXPECT_EQ(wait_for_job(resubmitted), "COMPLETED") << read_file(cancelled_dir / "slurm-job.out");
  for (const auto& id : ids) EXPECT_EQ(status_of(experiment / id), "done") << id;
}

// A run stopped with a checkpoint (here a clean stop that rank 1 asks for in epoch 2) is submitted
// again and its new job continues from the checkpoint (DDPLAB_RESUME=1), to the same records as a
// run that never stopped.
TEST_F(Slurm, AResubmittedRunContinuesFromItsCheckpoint) {
  Workspace ws(512, 200);
  auto spec = tiny_spec(ws, "continued");
  auto whole = run_spec(ws, spec, "whole");
  ASSERT_EQ(whole.command.exit_code, 0) << whole.command.output;
  spec["name"] = "continued";
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 11}};
  const auto path = ws.write_spec(spec, "continued.json");
  const fs::path dir = ws.out() / "continued" / "seed=3";
  auto first = slurm(fmt::format("{} run {} --launcher slurm", DDPLAB_BIN, path));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(wait_for_job(recorded_job(dir)), "FAILED") << "exit code 130: " << read_file(dir / "slurm-job.out");
  ASSERT_EQ(status_of(dir), "interrupted") << read_file(dir / "slurm-job.out");
  EXPECT_EQ(read_records(dir).size(), 1u);
  auto again = slurm(fmt::format("{} run {} debug.fault=none --launcher slurm", DDPLAB_BIN, path));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(wait_for_job(recorded_job(dir)), "COMPLETED") << read_file(dir / "slurm-job.out");
  auto manifest = nlohmann::json::parse(read_file(dir / "manifest.json"));
  EXPECT_EQ(manifest["status"], "done");
  ASSERT_EQ(manifest["restarts"].size(), 1u) << manifest.dump(2);
  EXPECT_EQ(manifest["restarts"][0]["reason"], "resubmitted");
  EXPECT_EQ(manifest["restarts"][0]["previous_status"], "interrupted");
  expect_same_metrics(read_records(dir), whole.records);
}

TEST_F(Slurm, ADryRunPrintsTheSbatchCommandsAndSubmitsNothing) {
  Workspace ws(512, 200);
  const auto spec = sweep_spec(ws, "dry");
  auto r = slurm(fmt::format("{} run {} --launcher slurm --dry-run --partition=local --time=5", DDPLAB_BIN, spec));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, "\n    sbatch --parsable --job-name=dry/"), 5u) << "4 runs and the report:\n"
                                                                               << r.output;
  EXPECT_EQ(count_of(r.output, " --partition=local --time=5 "), 5u) << r.output;
  EXPECT_NE(r.output.find("--ntasks=2 --cpus-per-task=1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" '--dependency=afterany:<the jobs above>' "), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "script: srun "), 4u) << r.output;
  EXPECT_NE(r.output.find("dry run: nothing is submitted or written"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(ws.out() / "dry")) << "a dry run writes nothing";
  auto queue = slurm("squeue -h -o %j");
  EXPECT_EQ(queue.output.find("dry/"), std::string::npos) << queue.output;
}

TEST_F(Slurm, AnSbatchRefusalNamesTheRunAndLosesNothingAlreadyWritten) {
  Workspace ws(512, 200);
  const auto spec = sweep_spec(ws, "refused");
  // One run done here first (what a refusal must leave as it was).
  auto local = run_ddplab(fmt::format("run {} 'sweep={{\"replicas.count\":[1]}}' repeats=1", spec));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const fs::path done = ws.out() / "refused" / "replicas.count=1,seed=3";
  const std::string records = read_file(done / "epochs.jsonl");
  auto r = slurm(fmt::format("{} run {} --launcher slurm --partition=nosuchpartition", DDPLAB_BIN, spec));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ddplab: error: run replicas.count=1,seed=4: sbatch refused the job (exit code 1): "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("nvalid partition"), std::string::npos) << "sbatch's own message:\n" << r.output;
  EXPECT_NE(r.output.find("(no job was submitted)"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(done / "epochs.jsonl"), records);
  EXPECT_EQ(status_of(done), "done");
  EXPECT_FALSE(fs::exists(ws.out() / "refused" / "replicas.count=1,seed=4" / "slurm-job.json"));
}

// Needs no cluster: a SLURM launcher without sbatch says so before it writes anything.
TEST(SlurmLauncher, WithoutSbatchOnPathIsAClearErrorAndWritesNothing) {
  Workspace ws(512, 200);
  auto spec = ws.base_spec("nosbatch");
  spec["sweep"] = {{"replicas.count", {1, 2}}};
  const auto path = ws.write_spec(spec, "nosbatch.json");
  const TempDir empty;
  auto r = run_command(fmt::format("PATH={} {} run {} --launcher slurm", empty.str(), DDPLAB_BIN, path));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fmt::format("ddplab: error: --launcher slurm: no `sbatch` on PATH ({})", empty.str())),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(ws.out() / "nosbatch"));
  auto local = run_command(fmt::format("{} run {} --partition=gpu", DDPLAB_BIN, path));
  EXPECT_EQ(local.exit_code, 2) << local.output;
  EXPECT_NE(local.output.find("--partition: is a SLURM option; it needs --launcher slurm"), std::string::npos)
      << local.output;
}

}  // namespace
}  // namespace ddplab::testing
