// The sweep policy (pure functions over run statuses and exit codes), then sweeps of tiny runs
// through runner::run_sweep in this process (no binary is spawned).
#include "ddplab/runner/sweep.h"

#include <algorithm>
#include <csignal>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/base/sha256.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/sweep_steps.h"
#include "integration/integration_util.h"

namespace ddplab::runner {
namespace {

namespace fs = std::filesystem;
using rundir::RunStatus;

TEST(RunnerSweepPolicy, ADoneOrDivergedRunIsSkipped) {
  EXPECT_TRUE(skips_run(RunStatus::kDone, false));
  EXPECT_TRUE(skips_run(RunStatus::kDiverged, false));
  for (auto s : {RunStatus::kRunning, RunStatus::kFailed, RunStatus::kInterrupted})
    EXPECT_FALSE(skips_run(s, false)) << rundir::name(s);
  EXPECT_FALSE(skips_run(std::nullopt, false)) << "a run not made yet";
}

TEST(RunnerSweepPolicy, ForceRunsADoneRunAgain) {
  EXPECT_FALSE(skips_run(RunStatus::kDone, true));
  EXPECT_FALSE(skips_run(RunStatus::kDiverged, true));
  EXPECT_EQ(run_start(true, true), RunStart::kStartOver) << "--force starts over even with a checkpoint";
}

TEST(RunnerSweepPolicy, AnUnfinishedRunWithACheckpointIsResumedAnyOtherStartsOver) {
  EXPECT_EQ(run_start(true, false), RunStart::kResume);
  EXPECT_EQ(run_start(false, false), RunStart::kStartOver);
}

TEST(RunnerSweepPolicy, AFailedRunIsCountedAndTheSweepGoesOn) {
  EXPECT_EQ(tally_of(kExitFailure, RunStatus::kFailed), Tally::kFailed);
  EXPECT_EQ(tally_of(kExitUserError, std::nullopt), Tally::kFailed) << "a user error before the run dir was made";
  SweepTally t;
  t.runs = 3;
  t.count(Tally::kFailed, kExitFailure, "a", "injected fault");
  EXPECT_FALSE(t.stopped());
  t.count(Tally::kDone, kExitOk, "b");
  t.count_skipped();
  EXPECT_EQ(t.failures.size(), 1u);
  EXPECT_EQ(t.failures[0], (std::pair<std::string, std::string>{"a", "injected fault"}));
  EXPECT_EQ(sweep_exit_code(t), kExitFailure);
  EXPECT_EQ(sweep_summary("sw", t), "ddplab: sweep sw: 1 done, 1 skipped, 1 failed");
}

TEST(RunnerSweepPolicy, AnInterruptedRunStopsTheSweepWithItsExitCode) {
  EXPECT_EQ(tally_of(exit_code_for_signal(SIGTERM), RunStatus::kInterrupted), Tally::kInterrupted);
  EXPECT_EQ(tally_of(exit_code_for_signal(SIGINT), std::nullopt), Tally::kInterrupted);
  EXPECT_EQ(tally_of(kExitFailure, RunStatus::kInterrupted), Tally::kInterrupted)
      << "a run whose manifest says interrupted stops the sweep whatever its exit code";
  SweepTally t;
  t.runs = 4;
  t.count(Tally::kDone, kExitOk, "a");
  t.count(Tally::kInterrupted, exit_code_for_signal(SIGTERM), "b");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(sweep_exit_code(t), 143);
  EXPECT_EQ(sweep_summary("sw", t), "ddplab: sweep sw: 1 done, 0 skipped, 0 failed, stopped after 2 of 4");
  SweepTally u;
  u.count(Tally::kInterrupted, kExitFailure, "c");
  EXPECT_EQ(sweep_exit_code(u), 130) << "an interrupted run whose exit code is not a signal's stops as Ctrl-C";
}

TEST(RunnerSweepPolicy, ADivergedRunIsNoFailure) {
  EXPECT_EQ(tally_of(kExitDiverged, RunStatus::kDiverged), Tally::kDiverged);
  SweepTally t;
  t.runs = 2;
  t.count(Tally::kDiverged, kExitDiverged, "a");
  t.count(Tally::kDone, kExitOk, "b");
  EXPECT_EQ(sweep_exit_code(t), kExitOk);
  EXPECT_EQ(sweep_summary("sw", t), "ddplab: sweep sw: 1 done, 0 skipped, 0 failed, 1 diverged");
}

TEST(RunnerSweepPolicy, ACollapsedRunIsCountedSkippedAndNoFailure) {
  EXPECT_EQ(tally_of(kExitCollapsed, RunStatus::kCollapsed), Tally::kCollapsed);
  EXPECT_TRUE(skips_run(RunStatus::kCollapsed, false));
  SweepTally t;
  t.runs = 2;
  t.count(Tally::kCollapsed, kExitCollapsed, "a");
  t.count(Tally::kDone, kExitOk, "b");
  EXPECT_EQ(sweep_exit_code(t), kExitOk);
  EXPECT_EQ(sweep_summary("sw", t), "ddplab: sweep sw: 1 done, 0 skipped, 0 failed, 1 collapsed");
}

// Two swept keys x 3 seeds: the seeds run in rounds, each round holds every arm once, and the
// arms' order inside the rounds follows neither axis (a load that changes during the sweep then
// falls on all arms alike). The same sweep always runs in the same order.
TEST(RunnerSweepOrder, SeedsRunInRoundsAndTheArmsInAShuffledOrder) {
  const nlohmann::json doc = {{"name", "order"},
                              {"seed", 1},
                              {"batch", {{"per_replica", 32}}},
                              {"sweep", {{"replicas.count", {1, 2}}, {"batch.per_replica", {32, 64}}}},
                              {"repeats", 3}};
  const auto runs = config::expand_sweep(doc, "order.json", {"replicas.count", "batch.per_replica"});
  ASSERT_EQ(runs.size(), 12u);
  const std::vector<size_t> order = run_order(runs);
  EXPECT_EQ(order, run_order(runs)) << "deterministic";
  std::vector<size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i) << "every run once";

  auto arm = [&](size_t i) { return runs[i].run_id.substr(0, runs[i].run_id.rfind(",seed=")); };
  std::vector<std::vector<std::string>> rounds(3);
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(runs[order[k]].spec.seed, static_cast<int64_t>(1 + k / 4))
        << "round " << k / 4 << " is seed " << 1 + k / 4;
    rounds[k / 4].push_back(arm(order[k]));
  }
  const std::vector<std::string> expansion = {arm(0), arm(3), arm(6), arm(9)};
  for (auto& r : rounds) {
    auto arms = r;
    std::sort(arms.begin(), arms.end());
    auto expected = expansion;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(arms, expected) << "each arm once per round";
  }
  EXPECT_FALSE(rounds[0] == expansion && rounds[1] == expansion && rounds[2] == expansion)
      << "the arms are shuffled, not run in the order of the axes";
  EXPECT_FALSE(rounds[0] == rounds[1] && rounds[1] == rounds[2]) << "each round draws its own order";
}

TEST(RunnerSweepPolicy, FailureReasonAndEta) {
  EXPECT_EQ(failure_reason("thrown", "manifest", 1), "thrown");
  EXPECT_EQ(failure_reason("", "manifest", 1), "manifest");
  EXPECT_EQ(failure_reason("", "", 1), "exit code 1");
  EXPECT_EQ(minutes_seconds(61.4), "1:01");
  EXPECT_EQ(minutes_seconds(0), "0:00");
  EXPECT_EQ(minutes_seconds(3599.6), "60:00");
  EXPECT_EQ(eta(0, 0, 3), "-:--");
  EXPECT_EQ(eta(10, 1, 2), "0:20");
  EXPECT_EQ(eta(10, 0.5, 3), "1:00") << "half an epoch in 10 s, 3 epochs left";
}

// A run that resumes has only the epochs after its checkpoint left to train (2.5 of 4 done at
// 10 steps an epoch leaves 1.5); with --force, or without a checkpoint, all of them.
TEST(RunnerSweepPolicy, ARunThatResumesHasTheEpochsAfterItsCheckpointLeft) {
  testing::TempDir tmp;
  const nlohmann::json doc = {
      {"name", "eta"}, {"epochs", 4}, {"output", tmp.str("runs")}, {"batch", {{"per_replica", 32}}}};
  const auto runs = config::expand_sweep(doc, "eta.json", {});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_DOUBLE_EQ(epochs_to_train(runs[0], false), 4) << "a run not made yet";
  const fs::path dir = rundir::run_dir(runs[0].spec);
  fs::create_directories(dir);
  testing::write_file(dir / "spec.json", runs[0].spec.resolved.dump());
  testing::write_file(dir / "manifest.json",
                      nlohmann::json{{"status", "interrupted"},
                                     {"checkpoint", {{"epochs_done", 2}, {"step_in_epoch", 5}, {"global_step", 25}}}}
                          .dump());
  EXPECT_DOUBLE_EQ(epochs_to_train(runs[0], false), 4) << "no checkpoint.pt";
  testing::write_file(dir / "checkpoint.pt", "x");
  EXPECT_DOUBLE_EQ(epochs_to_train(runs[0], false), 1.5);
  EXPECT_DOUBLE_EQ(epochs_to_train(runs[0], true), 4) << "--force starts over";
}

// run_sweep with its standard output captured.
struct SweepOutput {
  int code = 0;
  std::string out;
};
SweepOutput sweep_captured(const std::string& path, const std::vector<std::string>& overrides = {}, bool force = false,
                           bool dry_run = false) {
  ::testing::internal::CaptureStdout();
  const int code = run_sweep(path, overrides, force, dry_run);
  return {code, ::testing::internal::GetCapturedStdout()};
}

// Tiny runs: 256 training images, 128 test, mlp, 4 steps per epoch.
struct TinySweep {
  testing::Workspace ws{256, 128};
  nlohmann::json spec(const std::string& name) const {
    auto s = ws.base_spec(name);
    s["epochs"] = 1;
    return s;
  }
  fs::path dir(const std::string& name, const std::string& id) const { return ws.out() / name / id; }
};

std::optional<RunStatus> status_of(const fs::path& dir) { return rundir::read_status(dir); }

TEST(RunnerSweep, ADoneRunIsSkippedAndForceRunsItAgain) {
  TinySweep t;
  auto spec = t.spec("skip");
  spec["repeats"] = 1;
  const auto path = t.ws.write_spec(spec);
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk);
  const fs::path dir = t.dir("skip", "seed=3");
  ASSERT_EQ(status_of(dir), RunStatus::kDone);
  const auto records = testing::read_records(dir);
  ASSERT_EQ(records.size(), 1u);
  // Every epoch records the host's load; a 5 ms epoch may see no jiffy of /proc/stat go by (null).
  EXPECT_TRUE(records[0].contains("host_steal_pct")) << records[0];
  if (fs::exists("/proc/pressure/cpu")) {
    EXPECT_TRUE(records[0].at("host_cpu_wait_pct").is_number()) << records[0];
  }
  const std::string manifest = testing::read_file(rundir::manifest_file(dir));

  const auto [again, out] = sweep_captured(path);
  EXPECT_EQ(again, kExitOk);
  EXPECT_NE(out.find("[1/1] skipping seed=3: done"), std::string::npos) << out;
  EXPECT_NE(out.find("0 done, 1 skipped, 0 failed"), std::string::npos) << out;
  EXPECT_EQ(testing::read_file(rundir::manifest_file(dir)), manifest) << "a skipped run is untouched";

  const auto [forced, forced_out] = sweep_captured(path, {}, /*force=*/true);
  EXPECT_EQ(forced, kExitOk);
  EXPECT_EQ(forced_out.find("skipping"), std::string::npos) << forced_out;
  EXPECT_NE(forced_out.find("1 done, 0 skipped"), std::string::npos) << forced_out;
  EXPECT_EQ(testing::read_records(dir).size(), 1u) << "replaced, not appended";
}

TEST(RunnerSweep, AFailedRunDoesNotStopTheSweep) {
  TinySweep t;
  auto spec = t.spec("faulty");
  spec["debug"] = {{"rank", 0}, {"step", 1}};
  spec["sweep"] = {{"debug.fault", {"throw", "none"}}};
  const auto path = t.ws.write_spec(spec);
  const auto [code, out] = sweep_captured(path);
  EXPECT_EQ(code, kExitFailure);
  EXPECT_NE(out.find("1 done, 0 skipped, 1 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("failed debug.fault=throw,seed=3: injected fault"), std::string::npos) << out;
  EXPECT_EQ(status_of(t.dir("faulty", "debug.fault=throw,seed=3")), RunStatus::kFailed);
  EXPECT_EQ(status_of(t.dir("faulty", "debug.fault=none,seed=3")), RunStatus::kDone);
}

TEST(RunnerSweep, AnInterruptedRunStopsTheSweep) {
  TinySweep t;
  auto spec = t.spec("stop");
  spec["debug"] = {{"rank", 0}, {"step", 1}};
  spec["sweep"] = {{"debug.fault", {"stop", "none"}}};
  const auto path = t.ws.write_spec(spec);
  const int code = run_sweep(path, {}, false, false);
  EXPECT_TRUE(is_signal_exit_code(code)) << code;
  EXPECT_EQ(status_of(t.dir("stop", "debug.fault=stop,seed=3")), RunStatus::kInterrupted);
  EXPECT_FALSE(fs::exists(t.dir("stop", "debug.fault=none,seed=3"))) << "the sweep stops at the interrupted run";
}

TEST(RunnerSweep, AnUnfinishedRunWithACheckpointIsResumed) {
  TinySweep t;
  auto spec = t.spec("resume");
  spec["epochs"] = 2;
  spec["repeats"] = 1;
  spec["debug"] = {{"fault", "throw"}, {"rank", 0}, {"step", 6}};  // in epoch 2, after epoch 1's checkpoint
  const auto path = t.ws.write_spec(spec);
  const fs::path dir = t.dir("resume", "seed=3");
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitFailure);
  ASSERT_EQ(status_of(dir), RunStatus::kFailed);
  ASSERT_TRUE(rundir::holds_resumable_run(dir));
  EXPECT_EQ(testing::read_records(dir).size(), 1u);

  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk) << "the fault does not fire in a resumed attempt";
  EXPECT_EQ(status_of(dir), RunStatus::kDone);
  EXPECT_EQ(testing::read_records(dir).size(), 2u);
  EXPECT_EQ(rundir::read_manifest(dir)["restarts"].size(), 1u) << "resumed, not started over";
}

// A done run keeps model.pt and drops checkpoint.pt unless checkpoint.keep; the sweep says how much
// its directory holds.
TEST(RunnerSweep, ADoneRunDropsItsCheckpointUnlessKept) {
  TinySweep t;
  auto spec = t.spec("disk");
  spec["sweep"] = {{"checkpoint.keep", {false, true}}};
  const auto path = t.ws.write_spec(spec);
  const auto [code, out] = sweep_captured(path);
  ASSERT_EQ(code, kExitOk);
  const fs::path dropped = t.dir("disk", "checkpoint.keep=false,seed=3"),
                 kept = t.dir("disk", "checkpoint.keep=true,seed=3");
  EXPECT_FALSE(fs::exists(rundir::checkpoint_file(dropped)));
  EXPECT_TRUE(fs::exists(rundir::model_file(dropped)));
  EXPECT_TRUE(fs::exists(rundir::checkpoint_file(kept)));
  EXPECT_NE(out.find(fmt::format("ddplab: {} holds ", (t.ws.out() / "disk").string())), std::string::npos) << out;
}

// A run that trains to its end at chance (an lr too small to move the weights) says so: its own
// status, exit code and words, not "done, test accuracy 10%".
TEST(RunnerSweep, ARunThatEndsAtChanceIsCollapsedNotDone) {
  TinySweep t;
  auto spec = t.spec("chance");
  spec["optimizer"]["lr"] = 1e-12;
  const auto path = t.ws.write_spec(spec);
  const auto [code, out] = sweep_captured(path);
  EXPECT_EQ(code, kExitCollapsed) << out;
  const fs::path dir = t.dir("chance", "seed=3");
  EXPECT_EQ(status_of(dir), RunStatus::kCollapsed);
  const auto manifest = rundir::read_manifest(dir);
  EXPECT_EQ(manifest.value("exit_code", 0), kExitCollapsed);
  EXPECT_EQ(manifest.value("message", "").rfind("collapsed to chance: test accuracy ", 0), 0u) << manifest;
  EXPECT_EQ(out.find("ddplab: done"), std::string::npos) << out;

  spec["repeats"] = 1;  // as a sweep: counted, skipped when run again, and no failure of the sweep
  t.ws.write_spec(spec);
  const auto [again, again_out] = sweep_captured(path);
  EXPECT_EQ(again, kExitOk);
  EXPECT_NE(again_out.find("skipping seed=3: collapsed"), std::string::npos) << again_out;
}

// Runs a sweep expecting the stale-run refusal; returns its message.
std::string refusal_of(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    run_sweep(path, overrides, false, false);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the sweep ran";
  return "";
}

// A data file replaced after a sweep ran: its runs are refused naming the file and both hashes,
// as a changed spec field is; the file put back, they are reused.
TEST(RunnerSweep, AReplacedDataFileIsRefusedNamingItAndBothHashes) {
  TinySweep t;
  auto spec = t.spec("data");
  spec["repeats"] = 1;
  const auto path = t.ws.write_spec(spec);
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk);
  const fs::path labels = t.ws.data() / "train-labels-idx1-ubyte.gz";
  const std::string original = testing::read_file(labels);
  EXPECT_EQ(rundir::read_manifest(t.dir("data", "seed=3"))["inputs"][labels.string()], sha256_hex(original));

  testing::write_tiny_mnist(t.ws.data(), 256, 128, /*gzip=*/true, /*seed=*/99);
  const std::string replaced = testing::read_file(labels);
  const std::string message = refusal_of(path, {});
  EXPECT_NE(message.find(fmt::format("{}: content changed, sha256 {} -> {}", labels.string(), sha256_hex(original),
                                     sha256_hex(replaced))),
            std::string::npos)
      << message;

  testing::write_tiny_mnist(t.ws.data(), 256, 128, /*gzip=*/true);
  const auto [code, out] = sweep_captured(path);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(out.find("skipping seed=3: done"), std::string::npos) << out;
}

// The reproduction: a sweep run again after its spec changed never serves the old runs.
TEST(RunnerSweep, AChangedSpecIsRefusedNamingEachRunsChangedKeysAndTouchesNothing) {
  TinySweep t;
  auto spec = t.spec("stale");
  spec["sweep"] = {{"model.hidden", {16, 32}}};
  const auto path = t.ws.write_spec(spec);
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk);
  const fs::path dir = t.dir("stale", "model.hidden=16,seed=3");
  const std::string manifest = testing::read_file(rundir::manifest_file(dir));
  const std::string records = testing::read_file(rundir::epochs_file(dir));

  // An override of an unswept key.
  std::string message = refusal_of(path, {"epochs=2"});
  EXPECT_NE(message.find("2 of 2 run directories hold runs of a different spec"), std::string::npos) << message;
  EXPECT_NE(message.find("model.hidden=16,seed=3: /epochs: 1 -> 2"), std::string::npos) << message;
  EXPECT_NE(message.find("model.hidden=32,seed=3: /epochs: 1 -> 2"), std::string::npos) << message;
  EXPECT_NE(message.find("--force"), std::string::npos) << message;
  EXPECT_NE(message.find("output=DIR, name=NAME"), std::string::npos) << message;
  // An edit of the file, two keys at once.
  auto edited = spec;
  edited["optimizer"]["lr"] = 0.2;
  edited["model"]["dropout"] = 0.25;
  t.ws.write_spec(edited);
  message = refusal_of(path, {});
  EXPECT_NE(message.find("/model/dropout: "), std::string::npos) << message;
  EXPECT_NE(message.find("/optimizer/lr: "), std::string::npos) << message;
  // The same spec again: both runs are reused, untouched.
  t.ws.write_spec(spec);
  const auto [code, out] = sweep_captured(path);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(out.find("0 done, 2 skipped, 0 failed"), std::string::npos) << out;
  EXPECT_EQ(testing::read_file(rundir::manifest_file(dir)), manifest) << "nothing already written is touched";
  EXPECT_EQ(testing::read_file(rundir::epochs_file(dir)), records);
}

// A swept value is spelled into the run id only as far as a directory name can hold it: two data
// folders "d a" and "d_a" give one run id, and the second must not reuse the first's run.
TEST(RunnerSweep, ASweptValueWhoseRunIdStaysTheSameIsCaughtToo) {
  TinySweep t;
  const fs::path spaced = t.ws.dir().path() / "d a", underscored = t.ws.dir().path() / "d_a";
  fs::create_directory_symlink(t.ws.data(), spaced);
  fs::create_directory_symlink(t.ws.data(), underscored);
  auto spec = t.spec("swept");
  spec["sweep"] = {{"dataset.root", {spaced.string()}}};
  const auto path = t.ws.write_spec(spec);
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk);
  spec["sweep"] = {{"dataset.root", {underscored.string()}}};
  t.ws.write_spec(spec);
  const std::string message = refusal_of(path, {});
  EXPECT_NE(message.find("1 of 1 run directory holds runs of a different spec"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("/dataset/root: \"{}\" -> \"{}\"", spaced.string(), underscored.string())),
            std::string::npos)
      << message;
}

TEST(RunnerSweep, ADryRunShowsChangedRunsAndForceReplacesThem) {
  TinySweep t;
  auto spec = t.spec("changed");
  spec["repeats"] = 1;
  const auto path = t.ws.write_spec(spec);
  ASSERT_EQ(run_sweep(path, {}, false, false), kExitOk);
  const auto [code, out] = sweep_captured(path, {"epochs=2"}, false, /*dry_run=*/true);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(out.find("[1/1] seed=3  (changed: holds a run of another spec; --force replaces it)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("changed /epochs: 1 -> 2"), std::string::npos) << out;
  ASSERT_EQ(run_sweep(path, {"epochs=2"}, true, false), kExitOk);
  EXPECT_EQ(testing::read_records(t.dir("changed", "seed=3")).size(), 2u) << "replaced by the 2-epoch run";
  EXPECT_EQ(run_sweep(path, {"epochs=2"}, false, false), kExitOk) << "and now reused";
}

TEST(RunnerSweep, ADryRunWritesNothing) {
  TinySweep t;
  auto spec = t.spec("dry");
  spec["sweep"] = {{"model.hidden", {16, 32}}};
  const auto path = t.ws.write_spec(spec);
  const auto [code, out] = sweep_captured(path, {}, false, /*dry_run=*/true);
  EXPECT_EQ(code, kExitOk);
  EXPECT_NE(out.find("ddplab: dry: 2 runs in the order they would run (dry run: nothing is run or written)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[2/2] model.hidden=32,seed=3"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(t.ws.out() / "dry"));
}

}  // namespace
}  // namespace ddplab::runner
