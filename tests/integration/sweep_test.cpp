// Sweeps end to end: every run in its own directory, reruns skip done runs, a failed run does
// not stop the sweep, an interrupted sweep finishes on the next `ddplab run`; the same for
// packed sweeps (--jobs), whose runs must log what the sequential sweep's runs log.
#include <gtest/gtest.h>

#include "ddplab/rundir/run_log.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

std::string status_of(const fs::path& dir) {
  if (!fs::exists(dir / "manifest.json")) return "";
  return nlohmann::json::parse(read_file(dir / "manifest.json")).value("status", "");
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

nlohmann::json small_spec(const Workspace& ws, const std::string& name) {
  auto spec = ws.base_spec(name);
  spec["epochs"] = 1;
  return spec;
}

const std::vector<std::string> kTwoByTwo = {
    "model.hidden=16,optimizer.lr=0.05,seed=3", "model.hidden=16,optimizer.lr=0.1,seed=3",
    "model.hidden=32,optimizer.lr=0.05,seed=3", "model.hidden=32,optimizer.lr=0.1,seed=3"};

nlohmann::json two_by_two(const Workspace& ws) {
  auto spec = small_spec(ws, "sw");
  spec["sweep"] = {{"model.hidden", {16, 32}}, {"optimizer.lr", {0.05, 0.1}}};
  spec["repeats"] = 1;
  return spec;
}

TEST(SweepCli, TwoByTwoRunsIntoDistinctDirsAndRerunSkips) {
  Workspace ws(256, 100);
  auto path = ws.write_spec(two_by_two(ws));
  auto first = run_ddplab("run " + path);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto in_order = run_ids_in_run_order(two_by_two(ws));
  EXPECT_NE(first.output.find("[1/4] " + in_order[0] + " (ETA -:--)"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("[4/4] " + in_order[3] + " (ETA "), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("4 done, 0 skipped, 0 failed"), std::string::npos) << first.output;
  std::vector<std::string> starts;
  for (const auto& id : kTwoByTwo) {
    fs::path dir = ws.out() / "sw" / id;
    ASSERT_EQ(status_of(dir), "done") << id;
    EXPECT_EQ(read_records(dir).size(), 1u) << id;
    auto spec = nlohmann::json::parse(read_file(dir / "spec.json"));
    for (const char* k : {"sweep", "sweep_zip", "repeats"}) EXPECT_FALSE(spec.contains(k)) << id << " " << k;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir / "manifest.json"))["run_id"], id);
    starts.push_back(read_file(dir / "manifest.json"));
  }
  EXPECT_EQ(nlohmann::json::parse(read_file(ws.out() / "sw" / kTwoByTwo[1] / "spec.json"))["optimizer"]["lr"], 0.1);
  EXPECT_EQ(nlohmann::json::parse(read_file(ws.out() / "sw" / kTwoByTwo[2] / "spec.json"))["model"]["hidden"], 32);

  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const auto& id : kTwoByTwo)
    EXPECT_NE(again.output.find("skipping " + id + ": done"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("0 done, 4 skipped, 0 failed"), std::string::npos) << again.output;
  for (size_t i = 0; i < kTwoByTwo.size(); ++i)
    EXPECT_EQ(read_file(ws.out() / "sw" / kTwoByTwo[i] / "manifest.json"), starts[i]) << "a skipped run is untouched";

  auto forced = run_ddplab("run " + path + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(count(forced.output, "skipping"), 0u) << forced.output;
  EXPECT_NE(forced.output.find("4 done, 0 skipped"), std::string::npos) << forced.output;
  for (const auto& id : kTwoByTwo) {
    EXPECT_EQ(status_of(ws.out() / "sw" / id), "done") << id;
    EXPECT_EQ(read_records(ws.out() / "sw" / id).size(), 1u) << id << ": replaced, not appended";
  }
}

TEST(SweepCli, DryRunListsRunsAndWritesNothing) {
  Workspace ws(64, 32);
  auto path = ws.write_spec(two_by_two(ws));
  auto r = run_ddplab("run " + path + " --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& id : kTwoByTwo) EXPECT_NE(r.output.find(id), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/model/hidden: 32 -> 16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/optimizer/lr: 0.05 -> 0.1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(ws.out() / "sw")) << "a dry run writes nothing";
  // A bad swept value is a user error before anything runs.
  auto bad = run_ddplab("run " + path + " 'sweep={\"optimizer.lr\":[0.1,-1]}'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("/sweep/optimizer.lr/1: must be > 0, got -1"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(ws.out() / "sw"));
}

TEST(SweepCli, FailedRunDoesNotStopTheSweep) {
  Workspace ws(256, 100);
  auto spec = small_spec(ws, "faulty");
  spec["debug"] = {{"rank", 0}, {"step", 1}};
  spec["sweep"] = {{"debug.fault", {"throw", "none"}}};
  auto path = ws.write_spec(spec);
  auto r = run_ddplab("run " + path);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("1 done, 0 skipped, 1 failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed debug.fault=throw,seed=3: injected fault"), std::string::npos) << r.output;
  EXPECT_EQ(status_of(ws.out() / "faulty" / "debug.fault=throw,seed=3"), "failed");
  EXPECT_EQ(status_of(ws.out() / "faulty" / "debug.fault=none,seed=3"), "done");
  // The failed run is retried, the done one skipped.
  auto again = run_ddplab("run " + path);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("0 done, 1 skipped, 1 failed"), std::string::npos) << again.output;
}

TEST(SweepCli, InterruptedSweepFinishesOnTheNextRun) {
  Workspace ws(256, 100);
  auto path = ws.write_spec(sweep_running_in_order(small_spec(ws, "intr"), "epochs", {1, 300, 2}));
  const fs::path root = ws.out() / "intr";
  const std::vector<std::string> ids = {"epochs=1,seed=3", "epochs=300,seed=3", "epochs=2,seed=3"};  // as they run
  // SIGINT once the second run has logged an epoch; timeout is only a safety net. exec makes
  // the shell's pid ($$) that of ddplab, in the foreground, so SIGINT is not ignored.
  const std::string second = (root / ids[1] / "epochs.jsonl").string();
  auto r = run_command(
      "timeout -s INT 120 sh -c '( while [ ! -s \"" + second +
      "\" ] && kill -0 $$ 2>/dev/null; do sleep 0.02; done; kill -INT $$ 2>/dev/null ) & exec " DDPLAB_BIN " run " +
      path + "'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(status_of(root / ids[0]), "done") << r.output;
  ASSERT_NE(status_of(root / ids[1]), "done") << "the interrupt came too late: " << r.output;
  EXPECT_FALSE(fs::exists(root / ids[2] / "manifest.json")) << "the sweep must stop at the interrupt";

  auto again = run_ddplab("run " + path);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("skipping " + ids[0] + ": done"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("2 done, 1 skipped, 0 failed"), std::string::npos) << again.output;
  for (const auto& id : ids) EXPECT_EQ(status_of(root / id), "done") << id;
  EXPECT_EQ(read_records(root / ids[1]).size(), 300u) << "the interrupted run is finished";
}

// The binary is rebuilt (here: deleted) while a sweep runs: the runs it starts afterwards still
// run its own code, 2-replica workers included (they used to fail with exit code 127, the file
// behind /proc/self/exe's resolved path gone).
TEST(SweepCli, ABinaryReplacedDuringASweepStillStartsItsWorkers) {
  Workspace ws(256, 100);
  auto spec = small_spec(ws, "rebuilt");
  spec["sweep_zip"] = {{"replicas.count", {1, 2}}, {"epochs", {60, 1}}};
  auto first_is_one_replica = [](const std::vector<std::string>& ids) {
    return ids.front().find("replicas.count=1") != std::string::npos;
  };
  if (!first_is_one_replica(run_ids_in_run_order(spec)))
    spec["sweep_zip"] = {{"replicas.count", {2, 1}}, {"epochs", {1, 60}}};  // the long 1-replica run first
  const auto ids = run_ids_in_run_order(spec);
  ASSERT_TRUE(first_is_one_replica(ids)) << ids.front();
  const auto path = ws.write_spec(spec);
  const fs::path copy = ws.dir().path() / "ddplab-copy";
  fs::copy_file(DDPLAB_BIN, copy);
  const std::string first = (ws.out() / "rebuilt" / ids[0] / "epochs.jsonl").string();
  auto r = run_command("sh -c '( while [ ! -s \"" + first + "\" ]; do sleep 0.01; done; rm -f \"" + copy.string() +
                       "\" ) & exec \"" + copy.string() + "\" run " + path + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(copy)) << "the binary was gone before the 2-replica run started";
  for (const auto& id : ids) EXPECT_EQ(status_of(ws.out() / "rebuilt" / id), "done") << id << "\n" << r.output;
}

TEST(SweepCli, PlainSpecStillRunsOnceAsBefore) {
  Workspace ws(64, 32);
  auto path = ws.write_spec(small_spec(ws, "plain"));
  auto r = run_ddplab("run " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("[1/1]"), std::string::npos) << "no sweep lines for a plain spec: " << r.output;
  EXPECT_EQ(status_of(ws.out() / "plain" / "seed=3"), "done");
  auto dry = run_ddplab("run " + path + " --dry-run");
  EXPECT_EQ(dry.exit_code, 0);
  EXPECT_NE(dry.output.find("seed=3  (done: --force runs it again)"), std::string::npos) << dry.output;
}

// ---- Packed sweeps (--jobs, --cores: runner/pack.h) --------------------------------------------

// An epoch record without the fields that describe the machine (the rest must match bit for bit).
nlohmann::json without_timing(nlohmann::json record) {
  for (const auto& k : rundir::EpochRecord::machine_fields()) record.erase(k);
  return record;
}

TEST(SweepCli, APackedSweepGivesEveryRunTheRecordsOfTheSequentialOne) {
  Workspace ws(256, 100);
  auto spec = small_spec(ws, "pk");
  spec["epochs"] = 2;
  // Two 2-replica runs at once: each has its own launcher and rendezvous port.
  spec["sweep"] = {{"replicas.count", {1, 2}}, {"optimizer.lr", {0.05, 0.1}}};
  const auto path = ws.write_spec(spec);
  const std::string seq_out = (ws.out() / "seq").string(), pk_out = (ws.out() / "packed").string();
  auto seq = run_ddplab("run " + path + " output=" + seq_out);
  ASSERT_EQ(seq.exit_code, 0) << seq.output;
  auto packed = run_ddplab("run " + path + " output=" + pk_out + " --jobs 2 --cores 4");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_NE(packed.output.find("packed into at most 2 at once, 4 cores, no GPUs, longest first"), std::string::npos)
      << packed.output;
  EXPECT_NE(packed.output.find("4 done, 0 skipped, 0 failed"), std::string::npos) << packed.output;
  EXPECT_NE(packed.output.find("at most 2 runs at once"), std::string::npos) << packed.output;
  const std::vector<std::string> ids = {
      "optimizer.lr=0.05,replicas.count=1,seed=3", "optimizer.lr=0.05,replicas.count=2,seed=3",
      "optimizer.lr=0.1,replicas.count=1,seed=3", "optimizer.lr=0.1,replicas.count=2,seed=3"};
  for (const auto& id : ids) {
    const fs::path a = fs::path(seq_out) / "pk" / id, b = fs::path(pk_out) / "pk" / id;
    EXPECT_NE(packed.output.find("] started " + id), std::string::npos) << packed.output;
    EXPECT_NE(packed.output.find("] done " + id + ": test acc "), std::string::npos) << packed.output;
    EXPECT_NE(packed.output.find("] " + id + ": epoch 2/2, test acc "), std::string::npos) << packed.output;
    ASSERT_EQ(status_of(b), "done") << id << "\n" << packed.output;
    const auto ra = read_records(a), rb = read_records(b);
    ASSERT_EQ(ra.size(), 2u) << id;
    ASSERT_EQ(rb.size(), 2u) << id;
    for (size_t e = 0; e < ra.size(); ++e)
      EXPECT_EQ(without_timing(ra[e]).dump(), without_timing(rb[e]).dump()) << id << " epoch " << e + 1;
    auto sa = nlohmann::json::parse(read_file(a / "spec.json")), sb = nlohmann::json::parse(read_file(b / "spec.json"));
    sa.erase("output");
    sb.erase("output");
    EXPECT_EQ(sa, sb) << id << ": the resolved spec does not depend on the scheduling";
    if (id.find("count=2") != std::string::npos) {
      EXPECT_TRUE(fs::exists(b / "rank-1.log")) << id;
    }
  }
  // Rerun: every run is skipped; the report covers all four.
  auto again = run_ddplab("run " + path + " output=" + pk_out + " --jobs 2 --cores 4");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("0 done, 4 skipped, 0 failed"), std::string::npos) << again.output;
  EXPECT_TRUE(fs::exists(fs::path(pk_out) / "pk" / "report.html"));
}

TEST(SweepCli, APackedSweepGoesOnPastAFailedRun) {
  Workspace ws(256, 100);
  auto spec = small_spec(ws, "pkfail");
  spec["debug"] = {{"rank", 0}, {"step", 1}};
  spec["sweep"] = {{"debug.fault", {"throw", "none"}}};
  spec["repeats"] = 2;
  const auto path = ws.write_spec(spec);
  auto r = run_ddplab("run " + path + " --jobs 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("2 done, 0 skipped, 2 failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed debug.fault=throw,seed=3: injected fault"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("its console output: " + (ws.out() / "pkfail" / "sweep").string()), std::string::npos)
      << r.output;
  EXPECT_EQ(status_of(ws.out() / "pkfail" / "debug.fault=throw,seed=4"), "failed");
  EXPECT_EQ(status_of(ws.out() / "pkfail" / "debug.fault=none,seed=3"), "done");
  EXPECT_EQ(status_of(ws.out() / "pkfail" / "debug.fault=none,seed=4"), "done");
  // The child's console output is kept per run.
  EXPECT_NE(read_file(ws.out() / "pkfail" / "sweep" / "debug.fault=throw,seed=3.log").find("injected fault"),
            std::string::npos);
}

TEST(SweepCli, APackedSweepRefusesABudgetSmallerThanARunAndWritesNothing) {
  Workspace ws(64, 32);
  auto spec = small_spec(ws, "pkbig");
  spec["sweep"] = {{"replicas.count", {1, 4}}};
  const auto path = ws.write_spec(spec);
  auto r = run_ddplab("run " + path + " --cores 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("run replicas.count=4,seed=3 needs 4 cores (replicas.count 4 x replicas.threads 1), more "
                          "than the budget's 2 cores (--cores"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(ws.out() / "pkbig")) << "nothing runs, nothing is written";
  auto dry = run_ddplab("run " + path + " --cores 2 --dry-run");
  EXPECT_EQ(dry.exit_code, 2) << "a dry run checks the budget too: " << dry.output;
}

TEST(SweepCli, AnInterruptedPackedSweepStopsEveryRunAndTheSameCommandResumesThem) {
  Workspace ws(256, 100);
  auto spec = small_spec(ws, "pkintr");
  spec["sweep"] = {{"epochs", {300, 301}}};
  const auto path = ws.write_spec(spec);
  const fs::path root = ws.out() / "pkintr";
  const std::vector<std::string> ids = {"epochs=300,seed=3", "epochs=301,seed=3"};
  // SIGINT to the sweep once both runs have logged an epoch (see InterruptedSweepFinishesOnTheNextRun).
  const std::string a = (root / ids[0] / "epochs.jsonl").string(), b = (root / ids[1] / "epochs.jsonl").string();
  auto r = run_command(
      "timeout -s INT 120 sh -c '( while { [ ! -s \"" + a + "\" ] || [ ! -s \"" + b +
      "\" ]; } && kill -0 $$ 2>/dev/null; do sleep 0.02; done; kill -INT $$ 2>/dev/null ) & exec " DDPLAB_BIN " run " +
      path + " --jobs 2'");
  EXPECT_EQ(r.exit_code, 130) << r.output;
  for (const auto& id : ids) ASSERT_EQ(status_of(root / id), "interrupted") << id << "\n" << r.output;
  EXPECT_NE(r.output.find("stopping the 2 running runs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped after 2 of 2"), std::string::npos) << r.output;

  auto again = run_ddplab("run " + path + " --jobs 2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resuming from its checkpoint"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("2 done, 0 skipped, 0 failed"), std::string::npos) << again.output;
  EXPECT_EQ(read_records(root / ids[0]).size(), 300u);
  EXPECT_EQ(read_records(root / ids[1]).size(), 301u);
}

}  // namespace
}  // namespace ddplab::testing
