// The user's own model, both ways (issue 35): model.layers and model.torchscript, trained by
// ddplab on real processes (and simulated replicas), and their data-parallel gradients checked
// against one process's shard gradients on real Gloo ranks.
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/network.h"
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

// A module with tied weights (fc2.weight is fc1.weight): ddplab lists the tensor once, under its
// first name, as PyTorch's named_parameters() and DDP do, and two ranks through the Trainer's
// network, GradReducer and optimizer take two steps of the batch halves to plain PyTorch's two
// steps of the whole batch: one gradient (both uses summed), one momentum buffer, one update.
TEST(OwnModel, ATiedWeightIsOneParameterAndStepsAsInPlainPyTorch) {
  Workspace ws(64, 16);
  const std::filesystem::path reference = ws.dir().path() / "reference.json";
  const std::string path = save_scripted_own(ws.dir(), "tied", reference.string());
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  const json ref = json::parse(read_file(reference));
  auto doc = ws.base_spec("tied");
  doc["model"] = {{"torchscript", path}};
  doc["optimizer"] = {{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}};
  doc["replicas"]["count"] = 2;
  const auto spec = config::resolve(doc);
  const data::DatasetPair data = data::load_dataset(train::dataset_options(spec.dataset));
  const auto x = torch::tensor(ref["x"].get<std::vector<float>>()).view({8, 1, 28, 28});
  const auto y = torch::tensor(ref["y"].get<std::vector<int64_t>>());
  std::vector<train::NamedTensors> after(2);
  run_ranks(2, [&](const std::shared_ptr<distributed::Comm>& comm) {
    const int r = comm->rank;
    train::Network net = train::make_network(spec, data, r);
    distributed::GradReducer reducer(net.params, comm);
    for (int step = 0; step < 2; ++step) {
      reducer.prepare_for_backward();
      torch::nn::functional::cross_entropy(net.model->forward(x.narrow(0, 4 * r, 4)), y.narrow(0, 4 * r, 4)).backward();
      reducer.finalize();
      net.optimizer->step();
    }
    after[static_cast<size_t>(r)] = net.named;
  });
  for (const auto& named : after) {
    std::vector<std::string> names;
    for (const auto& [name, p] : named) names.push_back(name);
    EXPECT_EQ(names, ref["names"].get<std::vector<std::string>>());
    for (const auto& [name, p] : named) {
      if (!ref["params"].contains(name)) continue;
      const auto expected = torch::tensor(ref["params"][name].get<std::vector<float>>());
      EXPECT_TRUE(torch::allclose(p.detach().reshape({-1}), expected, 1e-5, 1e-6))
          << name << ": max difference " << (p.detach().reshape({-1}) - expected).abs().max().item<double>();
    }
  }
}

// The same module run by `ddplab run` on 2 processes with the audits on (the default "abort"):
// before, the tied tensor's second hook replaced the first and the run failed at epoch 1's end
// with "'fc2.weight' received no gradient". Now it finishes and the tied weight has moved.
TEST(OwnModel, ATiedWeightTorchscriptModuleTrainsOnTwoProcesses) {
  Workspace ws(256, 64);
  const std::string path = save_scripted_own(ws.dir(), "tied");
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  auto spec = ws.base_spec("tied");
  spec["model"] = {{"torchscript", path}};
  spec["replicas"]["count"] = 2;
  const auto run = run_spec(ws, spec, "tied");
  ASSERT_EQ(run.command.exit_code, 0) << run.command.output;
  ASSERT_EQ(run.records.size(), 2u);
  models::ModelOptions options;
  options.name = "torchscript";
  options.torchscript = path;
  std::vector<float> initial;
  for (const auto& p : models::make_model(options, models::InputShape{})->parameters())
    initial.insert(initial.end(), p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
  // model.pt holds the tied tensor under both names: embed (784 x 16 + 16), then fc1.weight, fc1.bias, fc2.weight.
  const size_t fc1 = 784 * 16 + 16, fc2 = fc1 + 16 * 16 + 16;
  ASSERT_EQ(run.params.size(), initial.size());
  const std::vector<float> fc1_now(run.params.begin() + fc1, run.params.begin() + fc1 + 256);
  EXPECT_NE(fc1_now, std::vector<float>(initial.begin() + fc1, initial.begin() + fc1 + 256)) << "the tied weight moved";
  EXPECT_EQ(fc1_now, std::vector<float>(run.params.begin() + fc2, run.params.begin() + fc2 + 256));
}

// Local SGD and EASGD average the parameters as one buffer of one dtype: a module with a float64
// layer is refused before the run directory is made, naming the parameter (before, the averager's
// INTERNAL ASSERT fired after it was made).
TEST(OwnModel, AMixedDtypeModuleUnderLocalSgdOrEasgdIsRefusedBeforeAnythingIsWritten) {
  Workspace ws(256, 64);
  const std::string path = save_scripted_own(ws.dir(), "mixed");
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  for (const json& sync : {json{{"local_sgd", {{"period", 2}}}}, json{{"easgd", {{"period", 2}, {"alpha", 0.25}}}}}) {
    SCOPED_TRACE(sync.dump());
    auto spec = ws.base_spec("mixed");
    spec["model"] = {{"torchscript", path}};
    spec["replicas"]["count"] = 2;
    spec["replicas"]["sync"] = sync;
    const auto run = run_spec(ws, spec, "mixed");
    EXPECT_EQ(run.command.exit_code, 2) << run.command.output;
    EXPECT_NE(run.command.output.find("/replicas/sync: " + sync.begin().key() +
                                      " averages the parameters as one buffer of one dtype, but the model's "
                                      "parameter 'head.weight' is float64 where 'body.weight' is float32"),
              std::string::npos)
        << run.command.output;
    EXPECT_FALSE(std::filesystem::exists(ws.out() / "mixed")) << "nothing written";
  }
}

}  // namespace
}  // namespace ddplab::testing
