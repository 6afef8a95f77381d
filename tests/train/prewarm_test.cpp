#include "ddplab/train/prewarm.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/network.h"
#include "ddplab/train/options.h"
#include "integration/integration_util.h"
#include "test_util.h"
#include "train/train_ranks.h"

namespace ddplab::train {
namespace {

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

bool all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

// The passes leave the weights, the buffers, every .grad and the dropout stream as they found
// them, although a training forward moves BatchNorm's statistics and draws dropout masks.
TEST(Prewarm, LeavesTheWeightsBuffersGradientsAndDropoutStreamAsTheyWere) {
  testing::Workspace ws(/*train=*/64, /*test=*/16);
  auto doc = ws.base_spec("prewarm");
  doc["model"] = testing::batch_norm_dropout_model(0.5);
  const config::ExperimentSpec spec = config::resolve(doc);
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  Network net = make_network(spec, data, /*rank=*/0);
  const DebugFaults faults(spec.debug, /*rank=*/0, /*resumed=*/false);
  const EvalSplit test{data.test};
  ASSERT_GE(net.buffers.size(), 3U) << "the model has BatchNorm's buffers";
  const auto params = clones(net.params), buffers = clones(net.buffers);

  torch::manual_seed(7);
  const double s = prewarm(net, test, /*batch=*/8, /*steps=*/2, faults, /*bf16=*/false);
  const at::Tensor draw_after = torch::rand({4});
  torch::manual_seed(7);
  const at::Tensor draw_without = torch::rand({4});

  EXPECT_GT(s, 0.0);
  EXPECT_TRUE(all_equal(net.params, params));
  EXPECT_TRUE(all_equal(net.buffers, buffers)) << "BatchNorm's statistics put back";
  for (const auto& p : net.params) EXPECT_FALSE(p.grad().defined()) << "no .grad written";
  EXPECT_TRUE(torch::equal(draw_after, draw_without)) << "the dropout stream put back";

  // What the test rests on: a training forward does move them.
  net.model->train();
  torch::NoGradGuard no_grad;
  net.model->forward(torch::randn({8, 1, 28, 28}));
  EXPECT_FALSE(all_equal(net.buffers, buffers));
}

// A run prewarmed gives the records of the same run without it, timing aside: BatchNorm and
// dropout on 2 simulated replicas (their dropout streams swapped through one generator),
// mnist_cnn's dropout under bf16 autocast, and replicas.cuda_graph (on a GPU when there is one;
// on a CPU the graphed form, run eagerly). The console is told how long it took.
TEST(Prewarm, ARunPrewarmedGivesTheRecordsOfTheRunWithout) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto simulated = ws.base_spec("without");
  simulated["model"] = testing::batch_norm_dropout_model(0.5);
  simulated["replicas"]["count"] = 2;
  simulated["replicas"]["mode"] = "simulated";
  auto bf16 = ws.base_spec("without");
  bf16["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.3}};
  bf16["precision"] = "bf16";
  auto graphed = ws.base_spec("without");
  graphed["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.3}};
  graphed["replicas"]["cuda_graph"] = true;
  if (torch::cuda::is_available()) graphed["replicas"]["device"] = "cuda";
  const auto said = [](const std::vector<std::string>& notes) {
    return std::count_if(notes.begin(), notes.end(), [](const std::string& line) {
      return line.rfind("replicas.prewarm_steps: 2 forward and backward passes", 0) == 0;
    });
  };
  for (auto doc : {simulated, bf16, graphed}) {
    SCOPED_TRACE(doc.dump());
    const config::ExperimentSpec without = config::resolve(doc);
    EXPECT_EQ(said(train_observed(without, 1)[0]->notes), 0);
    doc["name"] = "with";
    doc["replicas"]["prewarm_steps"] = 2;
    const config::ExperimentSpec with = config::resolve(doc);
    EXPECT_EQ(said(train_observed(with, 1)[0]->notes), 1);
    ASSERT_EQ(numeric_records(with).size(), static_cast<size_t>(with.epochs));
    EXPECT_EQ(numeric_records(with), numeric_records(without));
  }
}

// Two processes over gloo under model.sync_bn: the prewarm's training forwards all-reduce
// BatchNorm's statistics as training's do, on both ranks, before any step; the records and the
// saved weights are those of the run without it. The console says how long it took (rank 0's note
// comes through the launcher).
TEST(Prewarm, TwoProcessesUnderSyncBatchNormGiveTheRecordsOfTheRunWithout) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("without");
  doc["model"] = testing::batch_norm_dropout_model(0.0);
  doc["model"]["sync_bn"] = true;
  doc["replicas"]["count"] = 2;
  const auto without = testing::run_spec(ws, doc, "without");
  doc["replicas"]["prewarm_steps"] = 1;
  const auto with = testing::run_spec(ws, doc, "with");
  ASSERT_EQ(with.command.exit_code, 0) << with.command.output;
  ASSERT_EQ(without.command.exit_code, 0) << without.command.output;
  ASSERT_EQ(with.records.size(), 2U);
  auto numeric = [](std::vector<nlohmann::json> records) {
    for (auto& r : records)
      for (const auto& k : rundir::EpochRecord::machine_fields()) r.erase(k);
    return records;
  };
  EXPECT_EQ(numeric(with.records), numeric(without.records));
  EXPECT_EQ(with.params, without.params);
  EXPECT_NE(with.command.output.find("ddplab: note: replicas.prewarm_steps: 1 forward and backward passes"),
            std::string::npos)
      << with.command.output;
}

}  // namespace
}  // namespace ddplab::train
