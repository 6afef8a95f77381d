// `ddplab plan` end to end on the tiny MNIST-format data: it decides a calibration sweep, runs it
// with real processes (1 and 2 replicas), probes all-reduces with 2 real processes, writes
// plan.json, plan.md and plan.html, reuses the calibration and its probe when given them, and
// `--check` scores the plan on run directories.
#include "ddplab/plan/plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

TEST(PlanIntegration, TinyCalibrationWritesAPlanThatChecks) {
  Workspace ws(1024, 200);
  json spec = ws.base_spec("tiny_plan");
  spec["epochs"] = 3;
  const std::string path = ws.write_spec(spec);
  const fs::path out = ws.dir().path() / "plan";
  const auto r = run_ddplab(
      fmt::format("plan {} --grid replicas=1,2 batch=32,64,128 --target-acc 0.5 --out {}", path, out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ddplab plan: calibration of 3 sweeps"), std::string::npos) << r.output;
  const json plan = json::parse(read_file(out / "plan.json"));
  ASSERT_EQ(plan["cells"].size(), 6u) << plan.dump(2);
  EXPECT_EQ(plan["hash"].get<std::string>().size(), 64u) << "SHA-256, hex";
  EXPECT_FALSE(plan["fastest"].is_null()) << plan.dump(2);
  EXPECT_TRUE(fs::exists(out / "plan.md"));
  EXPECT_TRUE(fs::exists(out / "plan.html"));
  // The all-reduce probe: 2 real Gloo processes on 127.0.0.1, positive bandwidth and latency, and
  // the plan's communication constants are its.
  const json probe = json::parse(read_file(out / "calibration" / "probe.json"));
  EXPECT_EQ(probe["backend"], "gloo");
  EXPECT_EQ(probe["points"].size(), 7u) << probe.dump(2);
  EXPECT_GT(probe["bandwidth_bytes_per_s"].get<double>(), 0) << probe.dump(2);
  EXPECT_GT(probe["latency_s"].get<double>(), 0) << probe.dump(2);
  EXPECT_EQ(plan["step_time"]["comm_source"], "all-reduce probe") << plan.dump(2);
  EXPECT_EQ(plan["step_time"]["latency_s"], probe["latency_s"]);
  EXPECT_EQ(plan["probe"]["created"], probe["created"]);
  // The steps runs: 2 replicas (real processes) at global batches 32 and 64, to the end.
  const fs::path steps = out / "calibration" / "tiny_plan-calibration-steps";
  EXPECT_TRUE(fs::exists(steps / "batch.global=32,seed=3" / "steps.jsonl"));
  EXPECT_TRUE(fs::exists(steps / "batch.global=64,seed=3" / "epochs.jsonl"));
  // The timing runs: every grid per-replica batch that the steps runs do not time, 1 epoch each;
  // the compute curve passes through each of them.
  for (const char* run : {"timing-N1/batch.per_replica=32,seed=3", "timing-N1/batch.per_replica=64,seed=3",
                          "timing-N1/batch.per_replica=128,seed=3", "timing-N2/batch.per_replica=64,seed=3"})
    EXPECT_TRUE(fs::exists(out / "calibration" / ("tiny_plan-calibration-" + std::string(run)) / "epochs.jsonl"))
        << run;
  EXPECT_FALSE(fs::exists(out / "calibration" / "tiny_plan-calibration-timing-N2/batch.per_replica=16,seed=3"));
  EXPECT_EQ(plan["step_time"]["compute"]["1"]["points"].size(), 3u) << plan.dump(2);
  EXPECT_EQ(plan["step_time"]["compute"]["2"]["points"].size(), 3u) << plan.dump(2);
  // The same calibration, given: the same predictions.
  const auto again =
      run_ddplab(fmt::format("plan --calibration {} --grid replicas=1,2 batch=32,64,128 --target-acc "
                             "0.5 --out {}",
                             (out / "calibration").string(), (out / "again").string()));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("reusing the all-reduce probe"), std::string::npos) << again.output;
  EXPECT_EQ(json::parse(read_file(out / "again" / "plan.json"))["predictions"], plan["predictions"]);
  // The calibration's own runs started before the plan: --check refuses them, naming each.
  const auto check = run_ddplab(fmt::format("plan --check {} {}", (out / "plan.json").string(), steps.string()));
  ASSERT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find(plan["hash"].get<std::string>()), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("2 runs refused, not scored"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("before the plan was written"), std::string::npos) << check.output;
  EXPECT_TRUE(fs::exists(out / "check.md"));
}

// SIGINT during the calibration stops `ddplab plan` as it stops a sweep: no further calibration
// sweep starts and no plan is written from half a calibration; the same command finishes it.
TEST(PlanIntegration, AnInterruptedCalibrationStopsThePlan) {
  Workspace ws(1024, 200);
  json spec = ws.base_spec("stopped_plan");
  spec["epochs"] = 300;
  const std::string path = ws.write_spec(spec);
  const fs::path out = ws.dir().path() / "plan";
  const std::string records = (out / "calibration" / "stopped_plan-calibration-steps" / "*" / "epochs.jsonl").string();
  const auto r = run_command("timeout -s INT 120 sh -c '( while [ -z \"$(cat " + records +
                             " 2>/dev/null)\" ] && kill -0 $$ 2>/dev/null; do sleep 0.02; done; kill -INT $$ "
                             "2>/dev/null ) & exec " DDPLAB_BIN " plan " +
                             path + " --grid replicas=1,2 batch=32,64 --target-acc 0.5 --out " + out.string() + "'");
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_NE(r.output.find("ddplab plan: calibration stopped in"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out / "calibration" / "stopped_plan-calibration-timing-N1.json")) << r.output;
  EXPECT_FALSE(fs::exists(out / "plan.json")) << r.output;
}

TEST(PlanIntegration, AGridWithoutAxesIsAUserError) {
  Workspace ws(64, 20);
  const auto r = run_ddplab(fmt::format("plan {} --grid replicas=1,2", ws.write_spec(ws.base_spec("x"))));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--grid: needs both replicas=... and batch=..."), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddplab::testing
