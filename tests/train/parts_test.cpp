#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/train/options.h"
#include "ddplab/train/part.h"
#include "integration/integration_util.h"
#include "test_util.h"
#include "train/part_bench.h"
#include "train/train_ranks.h"

namespace ddplab::train {
namespace {

// steps.jsonl's records without their times.
std::vector<nlohmann::json> step_records(const config::ExperimentSpec& spec) {
  std::vector<nlohmann::json> records;
  std::istringstream lines(testing::read_file(rundir::steps_file(rundir::run_dir(spec))));
  for (std::string line; std::getline(lines, line);) {
    records.push_back(nlohmann::json::parse(line));
    records.back().erase("elapsed_s");
  }
  return records;
}

// The registry's order is the order every hook calls the parts in: each name once, and the order
// parts.cpp names (early stop's note before the profiler's, as the run happened).
TEST(Parts, TheRegistryNamesEachPartOnceInTheOrderItsHooksNeed) {
  std::vector<std::string> names;
  for (const PartEntry* entry : part_entries()) names.emplace_back(entry->name);
  const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_LT(at("early_stop"), at("profiler"));
}

// A part's state saved and loaded into a fresh one decides as the first would have: early stop's
// best epoch survives, so its patience runs out on time, and the fresh part writes what it says.
TEST(Parts, ASavedStateLoadedIntoAFreshPartGoesOnWhereTheFirstStopped) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("bench");
  doc["dataset"]["validation"] = 0.25;
  doc["early_stop"] = {{"patience", 2}};
  doc["epochs"] = 5;
  const config::ExperimentSpec spec = config::resolve(doc);
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  PartBench bench(spec, data);
  const auto epoch = [](int64_t n, double val_loss) {
    rundir::EpochRecord rec;
    rec.epoch = n;
    rec.val_loss = val_loss;
    rec.val_acc = 0.5;
    return rec;
  };
  auto first = bench.make("early_stop");
  first->end_epoch(epoch(1, 0.5));
  EXPECT_TRUE(std::filesystem::exists(rundir::best_model_file(rundir::run_dir(spec)))) << "epoch 1 is the best";
  first->end_epoch(epoch(2, 0.6));
  PartState state;
  first->save(state);

  auto fresh = bench.make("early_stop");
  fresh->load(state, "checkpoint.pt");
  EXPECT_FALSE(fresh->stops_before(2));
  fresh->end_epoch(epoch(3, 0.7));
  EXPECT_TRUE(fresh->stops_before(3)) << "epochs 2 and 3 did not improve on epoch 1";
  fresh->end_run(3);
  ASSERT_EQ(bench.recorder->notes.size(), 1U);
  EXPECT_NE(bench.recorder->notes[0].find("has not improved on epoch 1's 0.5000 for 2 epochs"), std::string::npos)
      << bench.recorder->notes[0];
}

// Every stateful part of a run keeps its own keys in checkpoint.pt (the noise scale's EMAs, the
// weight EMA's averages, the best epoch), and a run stopped inside an epoch and resumed from them
// writes the epoch and step records of a run never stopped.
TEST(Parts, EachPartsStateGoesThroughACheckpointAndAResumeGivesTheRecordsOfARunNeverStopped) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("never_stopped");
  doc["replicas"]["count"] = 2;
  doc["replicas"]["mode"] = "simulated";
  doc["dataset"]["validation"] = 0.25;
  doc["model"]["ema_decay"] = 0.9;
  doc["early_stop"] = {{"patience", 5}};
  doc["log"] = {{"every_steps", 2}};
  doc["epochs"] = 3;
  const config::ExperimentSpec never_stopped = config::resolve(doc);
  train_observed(never_stopped, 1);

  doc["name"] = "stopped";
  // 3 steps an epoch; asked before global step 3, read one step late: the stop is inside epoch 2.
  doc["debug"] = {{"fault", "stop"}, {"rank", 0}, {"step", 3}};
  const config::ExperimentSpec stopped = config::resolve(doc);
  const auto first = train_ranks(stopped, 1);
  ASSERT_TRUE(first[0].error) << "the stop fault interrupts the run";
  torch::serialize::InputArchive archive;
  archive.load_from(rundir::checkpoint_file(rundir::run_dir(stopped)).string());
  for (const char* key : {"gns_trace", "gns_grad_sq", "gns_steps", "best_epoch", "best_metric", "weight_ema_size"}) {
    at::Tensor t;
    EXPECT_TRUE(archive.try_read(key, t)) << key;
  }
  const auto second = train_ranks(stopped, 1, /*resume=*/true);
  EXPECT_FALSE(second[0].error) << "the resumed attempt finishes";
  EXPECT_EQ(numeric_records(stopped), numeric_records(never_stopped));
  EXPECT_EQ(step_records(stopped), step_records(never_stopped));
}

}  // namespace
}  // namespace ddplab::train
