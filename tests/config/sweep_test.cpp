#include "ddplab/config/sweep.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "test_util.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

std::vector<std::string> ids(const std::vector<SweepRun>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.run_id);
  return out;
}

std::string expand_error(const json& doc) {
  try {
    expand_sweep(doc, "spec");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SweepSpec, CartesianProductLastKeyFastest) {
  json doc = {
      {"name", "x"}, {"seed", 3}, {"sweep", {{"replicas.count", {1, 2}}, {"schedule.scale_rule", {"none", "linear"}}}}};
  auto runs = expand_sweep(doc, "spec", {"replicas.count", "schedule.scale_rule"});
  EXPECT_EQ(ids(runs), (std::vector<std::string>{"replicas.count=1,schedule.scale_rule=none,seed=3",
                                                 "replicas.count=1,schedule.scale_rule=linear,seed=3",
                                                 "replicas.count=2,schedule.scale_rule=none,seed=3",
                                                 "replicas.count=2,schedule.scale_rule=linear,seed=3"}));
  EXPECT_EQ(runs[3].spec.replicas.count, 2);
  EXPECT_STREQ(config::name(runs[3].spec.schedule.scale_rule), "linear");
  EXPECT_EQ(runs[3].spec.run_id, runs[3].run_id);
  EXPECT_EQ(runs[3].assignments.dump(), R"({"replicas.count":2,"schedule.scale_rule":"linear","seed":3})");
  // A key order puts those keys first; without one, axes are sorted by key name.
  auto reversed = expand_sweep(doc, "spec", {"schedule.scale_rule"});
  EXPECT_EQ(reversed[1].run_id, "schedule.scale_rule=none,replicas.count=2,seed=3");
  EXPECT_EQ(expand_sweep(doc, "spec")[1].run_id, "replicas.count=1,schedule.scale_rule=linear,seed=3");
}

TEST(SweepSpec, AxesFollowTheFileOrder) {
  testing::TempDir dir;
  std::string path = dir.str("sweep.json");
  testing::write_file(path, R"({"name": "x", "model": {"name": "mlp"},
                                 "sweep": {"schedule.scale_rule": ["none", "sqrt"], "model.hidden": [8, 16, 32]},
                                 "sweep_zip": {"replicas.count": [1, 2], "batch.global": [64, 128]}})");
  EXPECT_EQ(sweep_key_order(path),
            (std::vector<std::string>{"schedule.scale_rule", "model.hidden", "replicas.count", "batch.global"}));
  auto runs = load_sweep(path, {"seed=9"}).runs;
  ASSERT_EQ(runs.size(), 2u * 3u * 2u);
  EXPECT_EQ(runs[0].run_id, "schedule.scale_rule=none,model.hidden=8,replicas.count=1,batch.global=64,seed=9");
  EXPECT_EQ(runs[11].run_id, "schedule.scale_rule=sqrt,model.hidden=32,replicas.count=2,batch.global=128,seed=9");
}

// An override of a swept key would be overwritten in every run: refused, naming both; overriding
// the axis itself changes the sweep.
TEST(SweepSpec, AnOverrideOfASweptKeyIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.str("sweep.json");
  testing::write_file(path, R"({"name": "x", "sweep": {"replicas.count": [1, 2]},
                               "sweep_zip": {"optimizer.name": ["sgd", "adam"], "optimizer.lr": [0.05, 0.001]}})");
  EXPECT_EQ(testing::error_of([&] { load_sweep(path, {"epochs=2", "optimizer.lr=0.1"}); }),
            "override \"optimizer.lr=0.1\": optimizer.lr is swept (/sweep_zip/optimizer.lr), so no run would take this "
            "value; override sweep_zip itself ('sweep_zip={\"optimizer.lr\": [...]}' replaces the whole axis) or drop "
            "the key from it");
  EXPECT_NE(testing::error_of([&] { load_sweep(path, {"replicas.count=4"}); }).find("(/sweep/replicas.count)"),
            std::string::npos);
  const auto runs = load_sweep(path, {R"(sweep={"replicas.count": [4]})"}).runs;
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].spec.replicas.count, 4);
}

TEST(SweepSpec, ZipAxisMovesTogether) {
  json doc = {{"name", "x"},
              {"sweep", {{"optimizer.lr", {0.1, 0.2}}}},
              {"sweep_zip", {{"replicas.count", {1, 2, 4}}, {"batch.global", {64, 128, 256}}}}};
  auto runs = expand_sweep(doc, "spec", {"optimizer.lr", "replicas.count", "batch.global"});
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0].run_id, "optimizer.lr=0.1,replicas.count=1,batch.global=64,seed=1");
  EXPECT_EQ(runs[5].run_id, "optimizer.lr=0.2,replicas.count=4,batch.global=256,seed=1");
  for (const auto& r : runs) EXPECT_EQ(r.spec.per_replica_batch, 64) << r.run_id;
  EXPECT_EQ(runs[5].spec.global_batch, 256);
}

TEST(SweepSpec, ZipArraysMustHaveTheSameLength) {
  json doc = {{"name", "x"}, {"sweep_zip", {{"batch.global", {64, 128, 256}}, {"replicas.count", {1, 2}}}}};
  EXPECT_EQ(expand_error(doc), "/sweep_zip/replicas.count: must have 3 values like batch.global, got 2");
}

TEST(SweepSpec, RepeatsAddSeedsAsTheLastAxis) {
  json doc = {{"name", "x"}, {"seed", 5}, {"repeats", 3}, {"sweep", {{"optimizer.lr", {0.1, 0.2}}}}};
  auto runs = expand_sweep(doc, "spec");
  EXPECT_EQ(ids(runs), (std::vector<std::string>{"optimizer.lr=0.1,seed=5", "optimizer.lr=0.1,seed=6",
                                                 "optimizer.lr=0.1,seed=7", "optimizer.lr=0.2,seed=5",
                                                 "optimizer.lr=0.2,seed=6", "optimizer.lr=0.2,seed=7"}));
  EXPECT_EQ(runs[2].spec.seed, 7);
  EXPECT_EQ(runs[2].assignments.back(), 7);
  EXPECT_EQ(ids(expand_sweep({{"name", "x"}, {"repeats", 2}}, "spec")), (std::vector<std::string>{"seed=1", "seed=2"}));
}

TEST(SweepSpec, SweptSeedIsTheBaseOfRepeats) {
  json doc = {{"name", "x"}, {"repeats", 2}, {"sweep", {{"seed", {1, 10}}}}};
  EXPECT_EQ(ids(expand_sweep(doc, "spec")), (std::vector<std::string>{"seed=1", "seed=2", "seed=10", "seed=11"}));
}

TEST(SweepSpec, BadSweptValueNamesTheSweepEntry) {
  json doc = {{"name", "x"}, {"sweep", {{"optimizer.lr", {0.1, -1}}}}};
  EXPECT_EQ(expand_error(doc), "/sweep/optimizer.lr/1: must be > 0, got -1");
  doc = {{"name", "x"}, {"sweep_zip", {{"replicas.count", {1, 4}}, {"batch.global", {64, 66}}}}};
  EXPECT_EQ(expand_error(doc), "/sweep_zip/batch.global/1: must be divisible by replicas.count (4), got 66");
  doc = {{"name", "x"}, {"sweep", {{"optimizer.lrr", json::array({0.1})}}}};
  EXPECT_EQ(expand_error(doc), "/sweep/optimizer.lrr/0: unknown key; did you mean \"lr\"?");
  doc = {{"name", "x"}, {"sweep", {{"optimizer", json::array({json{{"lr", -2}}})}}}};
  EXPECT_EQ(expand_error(doc), "/sweep/optimizer/0/lr: must be > 0, got -2");
  doc = {{"name", "x"}, {"sweep", {{"epochs.x", json::array({1})}}}};
  EXPECT_EQ(expand_error(doc), "/sweep/epochs.x/0: /epochs: must be an integer, got {\"x\":1}");
}

TEST(SweepSpec, ErrorNotAboutASweptKeyNamesTheRun) {
  json doc = {{"name", "x"}, {"batch", {{"global", 66}}}, {"sweep", {{"replicas.count", {1, 4}}}}};
  EXPECT_EQ(expand_error(doc),
            "/sweep: run replicas.count=4,seed=1: /batch/global: must be divisible by "
            "replicas.count (4), got 66");
  // A mistake in the spec itself is reported as without a sweep.
  doc = {{"name", "x"}, {"epochs", 0}, {"sweep", {{"replicas.count", {1, 4}}}}};
  EXPECT_EQ(expand_error(doc), "/epochs: must be >= 1, got 0");
}

TEST(SweepSpec, MalformedSweepsAreRejected) {
  EXPECT_EQ(expand_error({{"name", "x"}, {"sweep", {{"optimizer.lr", json::array()}}}}),
            "/sweep/optimizer.lr: must be a non-empty array of values, got []");
  EXPECT_EQ(expand_error({{"name", "x"}, {"sweep", {{"optimizer.lr", 0.1}}}}),
            "/sweep/optimizer.lr: must be a non-empty array of values, got 0.1");
  EXPECT_EQ(expand_error({{"name", "x"}, {"sweep", {1, 2}}}),
            "/sweep: must be an object mapping dotted keys to arrays of values, got [1,2]");
  EXPECT_NE(expand_error({{"name", "x"}, {"sweep", {{"name", {"a", "b"}}}}}).find("/sweep/name: cannot be swept"),
            std::string::npos);
  EXPECT_NE(
      expand_error({{"name", "x"}, {"sweep", {{"output", json::array({"a"})}}}}).find("/sweep/output: cannot be swept"),
      std::string::npos);
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 0}}), "/repeats: must be an integer >= 1, got 0");
  EXPECT_EQ(expand_error(
                {{"name", "x"}, {"sweep", {{"seed", json::array({1})}}}, {"sweep_zip", {{"seed", json::array({2})}}}}),
            "/sweep_zip/seed: is also in sweep; a key can be on one axis only");
}

// Issue 8, bad input never crashes (tests/fuzz): the run limit was only checked against the
// sweep axes, so "repeats": 1e12 without a sweep reserved a vector of 10^12 runs (an allocation
// failure, not a user error); an unsigned repeats above INT64_MAX wrapped negative.
TEST(SweepSpec, HugeRepeatsAreAUserErrorNotAnAllocation) {
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 1000000000000}}),
            "/repeats: must be <= 100000 (the most runs a sweep may have), got 1000000000000");
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 18446744073709551615ULL}}),
            "/repeats: must be <= 100000 (the most runs a sweep may have), got 18446744073709551615");
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 50000}, {"sweep", {{"seed", {1, 2, 3}}}}}),
            "/sweep: expands to more than 100000 runs");
  try {
    expand_sweep({{"name", "x"}, {"repeats", 3}}, "spec", {}, /*max_runs=*/2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/repeats: expands to more than 2 runs");
  }
  EXPECT_EQ(expand_sweep({{"name", "x"}, {"repeats", 2}}, "spec", {}, 2).size(), 2u);
}

// seed + repeat overflowed int64 (undefined behaviour) for a seed near 2^63.
TEST(SweepSpec, RepeatsPastTheLargestSeedDoNotOverflow) {
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 2}, {"seed", 9223372036854775807LL}}),
            "/seed: must be <= 9007199254740991, got 9223372036854775807");
  EXPECT_EQ(expand_error({{"name", "x"}, {"repeats", 2}, {"seed", 9007199254740991LL}}),
            "/seed: must be <= 9007199254740991, got 9007199254740992");
  auto runs = expand_sweep({{"name", "x"}, {"repeats", 2}, {"seed", 9007199254740990LL}}, "spec");
  EXPECT_EQ(ids(runs), (std::vector<std::string>{"seed=9007199254740990", "seed=9007199254740991"}));
}

TEST(SweepSpec, UnsafeValuesAreSanitizedInRunIds) {
  json doc = {{"name", "x"},
              {"sweep",
               {{"dataset.root", {"/tmp/a b/../x", "ok-1.5+e=2,3"}},
                {"schedule.milestones", json::array({json::array({30, 60})})}}}};
  auto runs = expand_sweep(doc, "spec", {"dataset.root"});
  EXPECT_EQ(runs[0].run_id, "dataset.root=_tmp_a_b_.__x,schedule.milestones=_30,60_,seed=1");
  EXPECT_EQ(runs[1].run_id, "dataset.root=ok-1.5+e=2,3,schedule.milestones=_30,60_,seed=1");
  EXPECT_EQ(runs[0].spec.dataset.root, "/tmp/a b/../x") << "only the id is sanitized";
  for (const auto& r : runs) {
    EXPECT_EQ(r.run_id.find('/'), std::string::npos);
    EXPECT_EQ(r.run_id.find(".."), std::string::npos);
  }
}

TEST(SweepSpec, ObjectValuesShowTheirWordsInRunIds) {
  json doc = {{"name", "x"},
              {"replicas", {{"count", 2}}},
              {"sweep",
               {{"replicas.sync",
                 {"allreduce",
                  {{"local_sgd", {{"period", 16}, {"start_epoch", 1}}}},
                  {{"easgd", {{"alpha", 0.2}, {"period", 4}}}}}}}}};
  EXPECT_EQ(ids(expand_sweep(doc, "spec")),
            (std::vector<std::string>{"replicas.sync=allreduce,seed=1",
                                      "replicas.sync=local_sgd_period_16_start_epoch_1,seed=1",
                                      "replicas.sync=easgd_alpha_0.2_period_4,seed=1"}));
}

// debug.fault's array form, swept: the names joined by '+', not a row of escaped brackets.
TEST(SweepSpec, ArraysOfNamesShowTheNamesJoinedInRunIds) {
  json doc = {{"name", "x"},
              {"sweep", {{"debug.fault", {"none", json::array({"update_first_only", "eval_first_half"})}}}}};
  const auto runs = expand_sweep(doc, "spec");
  EXPECT_EQ(ids(runs), (std::vector<std::string>{"debug.fault=none,seed=1",
                                                 "debug.fault=update_first_only+eval_first_half,seed=1"}));
  EXPECT_EQ(runs[1].spec.debug.faults, (std::vector<Fault>{Fault::kUpdateFirstOnly, Fault::kEvalFirstHalf}));
}

TEST(SweepSpec, DuplicateRunIdsAreAnError) {
  std::string e = expand_error({{"name", "x"}, {"sweep", {{"dataset.root", {"a/b", "a_b"}}}}});
  EXPECT_NE(e.find("get the same run id \"dataset.root=a_b,seed=1\""), std::string::npos) << e;
  // The same value twice is named as such, not blamed on the sanitizing of run ids.
  e = expand_error({{"name", "x"}, {"sweep", {{"replicas.count", {2, 4, 2}}}}});
  EXPECT_EQ(e,
            "/sweep/replicas.count/2: repeats value 0, 2; give each value once (`repeats` runs a point with "
            "several seeds)");
}

// A value twice in a zip axis is fine when its partners differ (seed_gpus_86_vs_84: 1, 2, 2 GPUs
// at three step counts).
TEST(SweepSpec, AZipAxisMayRepeatAValue) {
  auto runs =
      expand_sweep({{"name", "x"}, {"sweep_zip", {{"replicas.count", {1, 2, 2}}, {"epochs", {4, 2, 4}}}}}, "spec");
  EXPECT_EQ(runs.size(), 3u);
}

// Every spec shipped in experiments/ expands and resolves (they are the documentation's examples).
TEST(SweepSpec, EveryShippedExperimentResolves) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DDPLAB_SOURCE_DIR) + "/experiments")) {
    if (entry.path().extension() != ".json") continue;
    const std::string path = entry.path().string();
    try {
      auto runs = expand_sweep(load_json_file(path), path, sweep_key_order(path));
      EXPECT_GE(runs.size(), 1u) << path;
    } catch (const Error& e) {
      ADD_FAILURE() << path << ": " << e.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 10) << "experiments/ holds the seed questions' specs";
}

// A run id names a directory: over 255 characters, mkdir would fail only when the run starts.
TEST(SweepSpec, RunIdLongerThanADirectoryNameIsAnError) {
  json sweep = json::object();
  for (const char* key : {"optimizer.lr", "optimizer.momentum", "optimizer.weight_decay", "schedule.warmup_epochs",
                          "schedule.base_batch", "replicas.bucket_mb", "dataset.train_limit", "dataset.test_limit",
                          "model.dropout", "replicas.max_restarts", "checkpoint.every_epochs", "epochs"})
    sweep[key] = json::array({1});
  sweep["optimizer.lr"] = json::array({0.1});
  sweep["optimizer.momentum"] = json::array({0.5});
  sweep["model.dropout"] = json::array({0.5});
  std::string e = expand_error({{"name", "x"}, {"sweep", sweep}});
  EXPECT_EQ(e.rfind("/sweep: run id \"", 0), 0u) << e;
  EXPECT_NE(e.find("more than the 255 a directory name may have"), std::string::npos) << e;
}

TEST(SweepSpec, NoSweepGivesOneRunNamedBySeed) {
  auto runs = expand_sweep({{"name", "x"}, {"seed", 4}}, "spec");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, "seed=4");
  EXPECT_EQ(runs[0].assignments.dump(), R"({"seed":4})");
  EXPECT_EQ(rundir::run_id(runs[0].spec), "seed=4");
  EXPECT_EQ(runs[0].spec.resolved, resolve({{"name", "x"}, {"seed", 4}}).resolved);
  EXPECT_FALSE(has_sweep({{"name", "x"}}));
  EXPECT_TRUE(has_sweep({{"name", "x"}, {"repeats", 1}}));
}

TEST(SweepSpec, RunDirectoryUsesTheRunId) {
  json doc = {{"name", "x"}, {"output", "out"}, {"sweep", {{"replicas.count", json::array({2})}}}};
  auto runs = expand_sweep(doc, "spec");
  EXPECT_EQ(rundir::run_dir(runs[0].spec), std::filesystem::path("out/x/replicas.count=2,seed=1"));
}

TEST(SweepSpec, ResolvedSpecHasNoSweepKeys) {
  json doc = {{"name", "x"},
              {"model", {{"name", "mlp"}}},
              {"repeats", 2},
              {"sweep", {{"replicas.count", {1, 2}}}},
              {"sweep_zip", {{"model.hidden", json::array({8})}}}};
  for (const auto& r : expand_sweep(doc, "spec"))
    for (const char* k : {"sweep", "sweep_zip", "repeats"}) EXPECT_FALSE(r.spec.resolved.contains(k)) << k;
  auto plain = resolve(doc);  // resolve() checks the sweep keys and drops them
  EXPECT_FALSE(plain.resolved.contains("sweep"));
  EXPECT_FALSE(plain.resolved.contains("repeats"));
  EXPECT_NE(expand_error({{"name", "x"}, {"repeats", "two"}}), "");
}

TEST(SweepSpec, ResolvedDifferencesListWhatARunChanges) {
  json base = resolve({{"name", "x"}, {"replicas", {{"threads", 1}}}}).resolved;
  json run =
      resolve({{"name", "x"}, {"replicas", {{"threads", 1}, {"count", 2}}}, {"batch", {{"global", 128}}}}).resolved;
  auto lines = resolved_differences(base, run);
  EXPECT_EQ(lines, (std::vector<std::string>{"/batch/global: added 128", "/batch/per_replica: removed",
                                             "/replicas/count: 1 -> 2"}));
  EXPECT_TRUE(resolved_differences(base, base).empty());
}

TEST(RunIdFlag, TakesTheIdsASweepMakesAndRefusesPathsAndOddCharacters) {
  check_run_id_flag("optimizer.lr=0.1,replicas.count=2,seed=3");
  for (const std::string& bad :
       std::vector<std::string>{"", "..", "a/b", "../up", "with space", std::string(kMaxRunIdChars + 1, 'a')}) {
    const std::string message = testing::error_of([&] { check_run_id_flag(bad); });
    EXPECT_NE(message.find("--run-id"), std::string::npos) << bad << ": " << message;
  }
}

}  // namespace
}  // namespace ddplab::config
