// Sweeps end to end: every run in its own directory, reruns skip done runs, a failed run does
// not stop the sweep, an interrupted sweep finishes on the next `ddplab run`.
#include <gtest/gtest.h>

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

const std::vector<std::string> kTwoByTwo = {"model.hidden=16,optimizer.lr=0.05,seed=3",
                                            "model.hidden=16,optimizer.lr=0.1,seed=3",
                                            "model.hidden=32,optimizer.lr=0.05,seed=3",
                                            "model.hidden=32,optimizer.lr=0.1,seed=3"};

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
  EXPECT_NE(first.output.find("[1/4] " + kTwoByTwo[0] + " (ETA -:--)"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("[4/4] " + kTwoByTwo[3] + " (ETA "), std::string::npos) << first.output;
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
  auto spec = small_spec(ws, "intr");
  spec["sweep"] = {{"epochs", {1, 300, 2}}};
  auto path = ws.write_spec(spec);
  const fs::path root = ws.out() / "intr";
  const std::vector<std::string> ids = {"epochs=1,seed=3", "epochs=300,seed=3", "epochs=2,seed=3"};
  // SIGINT once the second run has logged an epoch; timeout is only a safety net. exec makes
  // the shell's pid ($$) that of ddplab, in the foreground, so SIGINT is not ignored.
  const std::string second = (root / ids[1] / "epochs.jsonl").string();
  auto r = run_command("timeout -s INT 120 sh -c '( while [ ! -s \"" + second +
                       "\" ] && kill -0 $$ 2>/dev/null; do sleep 0.02; done; kill -INT $$ 2>/dev/null ) & exec " DDPLAB_BIN
                       " run " + path + "'");
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

}  // namespace
}  // namespace ddplab::testing
