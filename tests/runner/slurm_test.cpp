// The sbatch command lines and batch scripts of `ddplab run --launcher slurm`, and which runs it
// submits (runner/slurm.h); pure functions, no SLURM needed. The submission itself runs against a
// real cluster in tests/integration/slurm_test.cpp.
#include "ddplab/runner/slurm.h"

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "ddplab/launch/process.h"
#include "ddplab/launch/worker_env.h"

namespace ddplab::runner {
namespace {

namespace fs = std::filesystem;
using rundir::RunStatus;

config::ExperimentSpec spec_of(int count, int threads, config::Device device, const std::string& run_id = "") {
  auto spec = config::resolve(nlohmann::json{{"name", "exp"}, {"replicas", {{"count", count}, {"threads", threads}}}});
  spec.replicas.device = device;
  spec.run_id = run_id;
  return spec;
}

TEST(SlurmCommand, ACpuRunAsksForOneTaskPerReplicaWithItsThreads) {
  const auto spec = spec_of(2, 3, config::Device::kCpu, "replicas.count=2,seed=1");
  const fs::path dir = "/r/exp/replicas.count=2,seed=1";
  EXPECT_EQ(
      run_sbatch_command(spec, {}, dir),
      (std::vector<std::string>{"sbatch", "--parsable", "--job-name=exp/replicas.count=2,seed=1",
                                "--output=/r/exp/replicas.count=2,seed=1/slurm-job.out", "--open-mode=append",
                                "--ntasks=2", "--cpus-per-task=3", "/r/exp/replicas.count=2,seed=1/slurm-job.sh"}));
}

TEST(SlurmCommand, ACudaRunAsksForOneGpuPerTaskAndTheOptionsComeBeforeTheScript) {
  const auto spec = spec_of(4, 1, config::Device::kCuda);
  config::SlurmOptions o{"gpu", "2:00:00", "p42", {"--qos=high", "--exclusive"}};
  EXPECT_EQ(run_sbatch_command(spec, o, "/r/exp/seed=1"),
            (std::vector<std::string>{"sbatch", "--parsable", "--job-name=exp/seed=1",
                                      "--output=/r/exp/seed=1/slurm-job.out", "--open-mode=append", "--ntasks=4",
                                      "--cpus-per-task=1", "--gpus-per-task=1", "--partition=gpu", "--time=2:00:00",
                                      "--account=p42", "--qos=high", "--exclusive", "/r/exp/seed=1/slurm-job.sh"}));
}

TEST(SlurmCommand, TheBatchScriptRunsTheWorkersOfTheRunUnderSrun) {
  const auto spec = spec_of(2, 1, config::Device::kCpu, "lr=0.1,seed=2");
  const std::string script = run_batch_script(spec, "/opt/ddplab", "/r/exp/lr=0.1,seed=2/slurm-spec.json", false);
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u) << script;
  EXPECT_NE(script.find("\nexport DDPLAB_RESUME=1\n"), std::string::npos) << script;
  EXPECT_NE(script.find("\nexec srun --ntasks=2 --cpus-per-task=1 --kill-on-bad-exit=1 /opt/ddplab worker "
                        "/r/exp/lr=0.1,seed=2/slurm-spec.json --run-id lr=0.1,seed=2\n"),
            std::string::npos)
      << script;
  // A launcher around the submission (torchrun's RANK) would otherwise win over SLURM's variables.
  EXPECT_NE(script.find("\nunset RANK WORLD_SIZE "), std::string::npos) << script;
  const size_t unset_at = script.find("\nunset ");
  const std::string unset = script.substr(unset_at, script.find('\n', unset_at + 1) - unset_at) + " ";
  for (const std::string& name : launch::worker_env_names())
    EXPECT_NE(unset.find(" " + name + " "), std::string::npos) << name << " is not cleared: " << unset;
  EXPECT_NE(unset.find(" TORCHELASTIC_RUN_ID "), std::string::npos) << unset;
  const std::string forced = run_batch_script(spec, "/opt/ddplab", "/s.json", true);
  EXPECT_NE(forced.find("\nexport DDPLAB_FORCE=1\n"), std::string::npos) << forced;
  EXPECT_EQ(forced.find("DDPLAB_RESUME=1"), std::string::npos) << forced;
  const std::string cuda = run_batch_script(spec_of(2, 1, config::Device::kCuda), "/opt/ddplab", "/s.json", false);
  EXPECT_NE(cuda.find(" --gpu-bind=none "), std::string::npos) << cuda;
}

TEST(SlurmCommand, TheReportJobRunsAfterEveryJobHasEnded) {
  const auto argv = report_sbatch_command("exp", {"", "30", "", {"--qos=low"}}, "/r/exp", {"101", "102", "107"});
  EXPECT_EQ(argv, (std::vector<std::string>{"sbatch", "--parsable", "--job-name=exp/report",
                                            "--output=/r/exp/slurm-job.out", "--open-mode=append", "--ntasks=1",
                                            "--cpus-per-task=1", "--dependency=afterany:101:102:107", "--time=30",
                                            "--qos=low", "/r/exp/slurm-job.sh"}));
  EXPECT_NE(report_batch_script("/opt/ddplab", "/r/exp").find("\nexec /opt/ddplab report /r/exp\n"), std::string::npos);
}

TEST(SlurmCommand, ArgumentsThatNeedItAreQuotedForTheShell) {
  EXPECT_EQ(launch::shell_command({"sbatch", "--job-name=a/b,c=1", "/x y/it's.sh", ""}),
            "sbatch --job-name=a/b,c=1 '/x y/it'\\''s.sh' ''");
}

TEST(SlurmCommand, TheJobIdIsTheLastLineOfParsableOutput) {
  EXPECT_EQ(parsable_job_id("1234\n"), "1234");
  EXPECT_EQ(parsable_job_id("1234;cluster-a\n"), "1234");
  EXPECT_EQ(parsable_job_id("sbatch: warning: something\n5678\n"), "5678");
  EXPECT_EQ(parsable_job_id(""), std::nullopt);
  EXPECT_EQ(parsable_job_id("Submitted batch job 12\n"), std::nullopt) << "not --parsable";
}

TEST(SlurmPolicy, AQueuedOrRunningJobIsNeverSubmittedAgainEvenWithForce) {
  for (bool force : {false, true}) {
    EXPECT_EQ(slurm_action(std::nullopt, true, force), SlurmAction::kSkipQueued);
    EXPECT_EQ(slurm_action(RunStatus::kRunning, true, force), SlurmAction::kSkipQueued);
  }
}

TEST(SlurmPolicy, AFinishedRunIsSkippedUnlessForcedAndAnyOtherIsSubmitted) {
  EXPECT_EQ(slurm_action(RunStatus::kDone, false, false), SlurmAction::kSkipFinished);
  EXPECT_EQ(slurm_action(RunStatus::kDiverged, false, false), SlurmAction::kSkipFinished);
  EXPECT_EQ(slurm_action(RunStatus::kDone, false, true), SlurmAction::kSubmit);
  for (auto s : {RunStatus::kRunning, RunStatus::kFailed, RunStatus::kInterrupted})
    EXPECT_EQ(slurm_action(s, false, false), SlurmAction::kSubmit) << rundir::name(s) << ", its job ended";
  EXPECT_EQ(slurm_action(std::nullopt, false, false), SlurmAction::kSubmit) << "a cancelled job that never started";
}

TEST(SlurmPolicy, JobStatesThatMayStillRunAreActive) {
  for (const char* s : {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
                        "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})
    EXPECT_TRUE(is_active_job_state(s)) << s;
  for (const char* s : {"", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                        "BOOT_FAIL", "DEADLINE"})
    EXPECT_FALSE(is_active_job_state(s)) << s;
}

}  // namespace
}  // namespace ddplab::runner
