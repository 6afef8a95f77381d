// The user's own model, both ways (issue 35): model.layers and model.torchscript, trained by
// ddplab on real processes (and simulated replicas), and their data-parallel gradients checked
// against one process's shard gradients on real Gloo ranks.
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/options.h"
#include "distributed/ranks.h"
#include "integration/integration_util.h"
#include "models/own_models.h"

namespace ddplab::testing {
namespace {

using nlohmann::json;

// The records of two runs agree, bit for bit, in what depends on the numbers computed (not on
// wall time), and so do their final weights.
void expect_same_training(const RunOutput& a, const RunOutput& b) {
  ASSERT_EQ(a.records.size(), 2u);
  ASSERT_EQ(b.records.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    for (const char* k : {"train_loss", "train_acc", "test_loss", "test_acc", "grad_norm", "step"}) {
      ASSERT_TRUE(a.records[e].contains(k)) << k;
      EXPECT_EQ(a.records[e][k], b.records[e][k]) << k << " epoch " << e + 1;
    }
  }
  EXPECT_EQ(a.params, b.params) << "the final weights, bit for bit";
}

TEST(OwnModel, MnistCnnAsLayersTrainsToTheSameRecordsBitForBitAsTheBuiltIn) {
  Workspace ws(256, 100);
  auto spec = ws.base_spec("builtin");
  spec["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.5}};
  spec["replicas"]["count"] = 2;
  auto builtin = run_spec(ws, spec, "builtin");
  spec["model"] = {{"layers", mnist_cnn_layers(0.5)}};
  auto listed = run_spec(ws, spec, "listed");
  ASSERT_EQ(builtin.command.exit_code, 0) << builtin.command.output;
  ASSERT_EQ(listed.command.exit_code, 0) << listed.command.output;
  expect_same_training(builtin, listed);
}

// Rank r of 2 takes half r of a batch through GradReducer (mean); one process takes each half on a
// copy of its own. The reduced gradients must equal the halves' average. `make` builds the model
// (the same weights every call); BatchNorm normalizes each half by its own statistics either way.
void expect_two_ranks_average_the_shard_gradients(const std::function<std::shared_ptr<models::Model>()>& make) {
  torch::manual_seed(11);
  const auto x = torch::randn({8, 1, 28, 28});
  const auto y = torch::randint(10, {8});
  std::vector<std::shared_ptr<models::Model>> ranks{make(), make()};
  auto one = make();
  std::vector<at::Tensor> average;
  for (int64_t h = 0; h < 2; ++h) {
    one->zero_grad();
    torch::nn::functional::cross_entropy(one->forward(x.narrow(0, 4 * h, 4)), y.narrow(0, 4 * h, 4)).backward();
    const auto params = one->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (h == 0) average.push_back(params[i].grad().clone() / 2);
      if (h == 1) average[i] += params[i].grad() / 2;
    }
  }
  std::vector<std::vector<at::Tensor>> reduced(2);
  run_ranks(2, [&](const std::shared_ptr<distributed::Comm>& comm) {
    const int r = comm->rank;
    auto& model = *ranks[static_cast<size_t>(r)];
    distributed::GradReducer sync(model.parameters(), comm);
    sync.prepare_for_backward();
    torch::nn::functional::cross_entropy(model.forward(x.narrow(0, 4 * r, 4)), y.narrow(0, 4 * r, 4)).backward();
    sync.finalize();
    for (const auto& p : model.parameters()) reduced[static_cast<size_t>(r)].push_back(p.grad().clone());
  });
  ASSERT_EQ(reduced[0].size(), average.size());
  for (size_t i = 0; i < average.size(); ++i)
    for (size_t r = 0; r < 2; ++r)
      EXPECT_TRUE(torch::allclose(reduced[r][i], average[i], 1e-5, 1e-6))
          << "parameter " << i << " on rank " << r << ": max difference "
          << (reduced[r][i] - average[i]).abs().max().item<double>();
}

TEST(OwnModel, LayersModelTwoRankGradientsAreTheAverageOfTheShardGradients) {
  const json layers = json::array({{{"type", "conv"}, {"channels", 4}, {"kernel", 3}, {"padding", 1}},
                                   {{"type", "batch_norm"}},
                                   {{"type", "relu"}},
                                   {{"type", "residual"}, {"channels", 8}, {"stride", 2}},
                                   {{"type", "avg_pool"}, {"kernel", 2}},
                                   {{"type", "flatten"}},
                                   {{"type", "linear"}, {"features", 10}}});
  const auto options = train::model_options(config::resolve({{"name", "x"}, {"model", {{"layers", layers}}}}).model);
  expect_two_ranks_average_the_shard_gradients([&] {
    torch::manual_seed(3);
    return models::make_model(options, models::InputShape{});
  });
}

TEST(OwnModel, TorchscriptTwoRankGradientsAreTheAverageOfTheShardGradients) {
  TempDir dir;
  const std::string path = save_scripted_cnn(dir);
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  models::ModelOptions options;
  options.name = "torchscript";
  options.torchscript = path;
  expect_two_ranks_average_the_shard_gradients([&] { return models::make_model(options, models::InputShape{}); });
}

// A scripted CNN with BatchNorm (not one of the four) on 1 and 2 processes and 2 simulated
// replicas: it learns; 2 simulated replicas compute what 2 processes do (per-replica BatchNorm,
// rank 0's buffers kept, as DDP); model.pt holds its trained weights.
TEST(OwnModel, ATorchscriptModuleTrainsOnOneAndTwoProcessesAndSimulatedReplicas) {
  Workspace ws(512, 100);
  const std::string path = save_scripted_cnn(ws.dir());
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  auto spec = ws.base_spec("script");
  spec["model"] = {{"torchscript", path}};
  std::vector<RunOutput> runs;
  const std::vector<std::pair<int, std::string>> arms{{1, "processes"}, {2, "processes"}, {2, "simulated"}};
  for (const auto& [count, mode] : arms) {
    spec["replicas"]["count"] = count;
    spec["replicas"]["mode"] = mode;
    runs.push_back(run_spec(ws, spec, fmt::format("script{}{}", count, mode)));
    ASSERT_EQ(runs.back().command.exit_code, 0) << runs.back().command.output;
    ASSERT_EQ(runs.back().records.size(), 2u);
    EXPECT_GT(runs.back().records[1]["test_acc"].get<double>(), 0.5) << count << " " << mode;
    EXPECT_EQ(runs.back().params.size(), 8u * 9 + 8 + 8 + 8 + 10 * 8 * 14 * 14 + 10)
        << "model.pt loads into the module";
  }
  expect_close_metrics(runs[1].records[1], runs[2].records[1], 1e-4, "2 processes vs 2 simulated");
  EXPECT_LE(max_relative_difference(runs[1].params, runs[2].params), 1e-4);
}

// Checkpoint and resume hold the module's weights, BatchNorm buffers and optimizer state: a run
// stopped in its second epoch (debug fault stop, 2 processes) and run again ends as one that was not.
TEST(OwnModel, AStoppedTorchscriptRunResumesToTheSameRecords) {
  Workspace ws(512, 100);
  const std::string path = save_scripted_cnn(ws.dir());
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  auto spec = ws.base_spec("full");
  spec["model"] = {{"torchscript", path}};
  spec["replicas"]["count"] = 2;
  const auto full = run_spec(ws, spec, "full");
  ASSERT_EQ(full.command.exit_code, 0) << full.command.output;
  spec["debug"] = {{"fault", "stop"}, {"rank", 1}, {"step", 12}};  // 8 steps an epoch
  const auto stopped = run_spec(ws, spec, "stopped");
  ASSERT_NE(stopped.command.exit_code, 0) << stopped.command.output;
  const auto resumed = run_spec(ws, spec, "stopped");
  ASSERT_EQ(resumed.command.exit_code, 0) << resumed.command.output;
  EXPECT_NE(resumed.command.output.find("resuming"), std::string::npos) << resumed.command.output;
  expect_same_training(full, resumed);
}

}  // namespace
}  // namespace ddplab::testing
