// Model "layers" (models/layers.cpp): a model described in the spec, built from model.layers
// through config::resolve and train::model_options as the trainer builds it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/models/models.h"
#include "ddplab/train/options.h"
#include "models/own_models.h"
#include "test_util.h"

namespace ddplab::models {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::mnist_cnn_layers;

ModelOptions layers_options(const json& layers) {
  return train::model_options(config::resolve({{"name", "x"}, {"model", {{"layers", layers}}}}).model);
}

std::shared_ptr<Model> make_layers(const json& layers, const InputShape& shape = {}) {
  return make_model(layers_options(layers), shape);
}

TEST(LayersModel, MnistCnnAsLayersDrawsTheSameWeightsAndComputesTheSameLogits) {
  torch::manual_seed(5);
  auto builtin = make_model(ModelOptions{}, InputShape{});
  torch::manual_seed(5);
  auto listed = make_layers(mnist_cnn_layers());
  const auto a = builtin->parameters(), b = listed->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  EXPECT_EQ(listed->named_parameters()[0].key(), "conv0.weight");
  EXPECT_EQ(listed->named_parameters()[7].key(), "linear10.bias");
  // Training mode: the dropout masks come from the same draws.
  const auto x = torch::randn({4, 1, 28, 28});
  torch::manual_seed(6);
  const auto ya = builtin->forward(x);
  torch::manual_seed(6);
  EXPECT_TRUE(torch::equal(ya, listed->forward(x)));
}

TEST(LayersModel, ResidualBlocksAndBatchNormBuildWithBuffersAndGiveLogits) {
  auto net = make_layers(json::array({{{"type", "conv"}, {"channels", 8}, {"kernel", 3}, {"padding", 1}},
                                      {{"type", "batch_norm"}},
                                      {{"type", "gelu"}},
                                      {{"type", "residual"}, {"channels", 8}},
                                      {{"type", "residual"}, {"channels", 16}, {"stride", 2}},
                                      {{"type", "avg_pool"}, {"kernel", 14}},
                                      {{"type", "flatten"}},
                                      {{"type", "linear"}, {"features", 10}}}));
  EXPECT_EQ(net->forward(torch::randn({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  // batch_norm1 and the blocks' BNs (the second block's shortcut projects: 3 BNs), 3 buffers each.
  EXPECT_EQ(net->buffers().size(), 3u * (1 + 2 + 3));
  EXPECT_EQ(net->named_parameters().contains("residual4.proj.weight"), true);
  EXPECT_EQ(net->named_parameters().contains("residual3.proj.weight"), false);
}

TEST(LayersModel, ALayerThatCannotTakeItsInputNamesItsPointerAndTheShapes) {
  EXPECT_EQ(error_of([] { make_layers(json::array({{{"type", "linear"}, {"features", 10}}})); }),
            "/model/layers/0: linear needs flat features [B, F] (put a flatten layer before it), got input "
            "[B, 1, 28, 28]");
  EXPECT_EQ(error_of([] {
              make_layers(json::array(
                  {{{"type", "flatten"}}, {{"type", "linear"}, {"features", 10}}, {{"type", "batch_norm"}}}));
            }),
            "/model/layers/2: batch_norm needs images [B, C, H, W], got input [B, 10]");
  EXPECT_EQ(error_of([] {
              make_layers(json::array({{{"type", "max_pool"}, {"kernel", 8}},
                                       {{"type", "max_pool"}, {"kernel", 4}},
                                       {{"type", "flatten"}},
                                       {{"type", "linear"}, {"features", 10}}}));
            }),
            "/model/layers/1: max_pool's kernel 4 (padding 0) is larger than its input [B, 1, 3, 3]");
  EXPECT_EQ(error_of([] { make_layers(json::array({{{"type", "flatten"}}, {{"type", "linear"}, {"features", 7}}})); }),
            "/model/layers/1: the last layer must give the logits [B, 10] (the dataset's 10 classes), gives [B, 7]");
  // The dataset decides: the same list for CIFAR-100's 3 x 32 x 32 images and 100 classes.
  EXPECT_EQ(error_of([] { make_layers(mnist_cnn_layers(), InputShape{3, 32, 32, 100}); }),
            "/model/layers/10: the last layer must give the logits [B, 100] (the dataset's 100 classes), gives "
            "[B, 10]");
}

TEST(LayersSpec, NameIsInferredAndMustAgreeAndEachTypeTakesItsOwnFields) {
  auto spec = config::resolve({{"name", "x"}, {"model", {{"layers", mnist_cnn_layers()}}}});
  EXPECT_EQ(spec.model.name, "layers");
  ASSERT_EQ(spec.model.layers.size(), 11u);
  EXPECT_EQ(spec.model.layers[0].stride, 1) << "conv's default";
  EXPECT_EQ(spec.model.layers[2].stride, 2) << "a pool's stride defaults to its kernel";
  EXPECT_EQ(spec.resolved["model"]["layers"][2]["stride"], 2) << "spec.json names every setting";
  EXPECT_EQ(
      error_of([] { config::resolve({{"name", "x"}, {"model", {{"name", "mlp"}, {"layers", mnist_cnn_layers()}}}}); }),
      "/model/name: must be \"layers\" (or left out) when model.layers is given, got \"mlp\"");
  EXPECT_EQ(error_of([] { config::resolve({{"name", "x"}, {"model", {{"name", "layers"}}}}); }),
            "/model/layers: model.name \"layers\" needs the list of layers, got none");
  EXPECT_EQ(
      error_of([] { config::resolve({{"name", "x"}, {"model", {{"layers", {{{"type", "relu"}, {"kernel", 3}}}}}}}); }),
      "/model/layers/0/kernel: a relu layer takes no other fields, got {\"kernel\":3,\"type\":\"relu\"}");
  EXPECT_EQ(
      error_of([] { config::resolve({{"name", "x"}, {"model", {{"layers", {{{"type", "conv"}, {"kernel", 3}}}}}}}); }),
      "/model/layers/0/channels: is required for a conv layer, got {\"kernel\":3,\"type\":\"conv\"}");
  EXPECT_EQ(error_of([] {
              config::resolve({{"name", "x"}, {"model", {{"layers", {{{"type", "pool"}}}}}}});
            }).rfind("/model/layers/0/type: must be one of \"conv\", ", 0),
            0u);
}

TEST(LayersSpec, AnOverrideOrSweepKeyReachesALayersFieldByIndex) {
  json doc = {{"name", "x"}, {"model", {{"layers", mnist_cnn_layers()}}}};
  config::apply_override(doc, "model.layers.3.channels=16");
  EXPECT_EQ(config::resolve(doc).model.layers[3].channels, 16);
  doc["sweep"] = {{"model.layers.3.channels", {32, 64}}};
  const auto runs = config::expand_sweep(doc, "spec.json");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].spec.model.layers[3].channels, 32);
  EXPECT_EQ(runs[1].spec.model.layers[3].channels, 64);
  EXPECT_EQ(runs[1].run_id.rfind("model.layers.3.channels=64,seed=", 0), 0u) << runs[1].run_id;
  EXPECT_EQ(error_of([&] { config::apply_override(doc, "model.layers.11.channels=16"); }),
            "override \"model.layers.11.channels=16\": \"model.layers\" is a list of 11 items; \"11\" is not the index "
            "of one");
}

}  // namespace
}  // namespace ddplab::models
