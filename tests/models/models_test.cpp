#include "ddplab/models/models.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"

namespace ddplab::models {
namespace {

ModelOptions model(const std::string& name, double dropout = 0.5, int64_t hidden = 128) {
  ModelOptions m;
  m.name = name;
  m.dropout = dropout;
  m.hidden = hidden;
  if (name == "layers") m.layers = {{config::LayerType::kFlatten}, {config::LayerType::kLinear, 0, 0, 0, 0, 10}};
  return m;
}

// torchscript needs a module saved from Python: tests/models/torchscript_test.cpp.
bool needs_a_file(const ModelEntry& m) { return std::string(m.name) == "torchscript"; }

TEST(Models, MnistCnnHasTheSeedParameterCount) {
  auto net = make_model(model("mnist_cnn"), InputShape{});
  // conv1 1*32*25+32, conv2 32*64*25+64, fc1 3136*1024+1024, fc2 1024*10+10
  EXPECT_EQ(parameter_count(*net), 832 + 51264 + 3212288 + 10250);
  EXPECT_EQ(parameter_count(*net), 3274634);
}

TEST(Models, MnistCnnOutputsLogitsPerImage) {
  torch::manual_seed(0);
  auto net = make_model(model("mnist_cnn"), InputShape{});
  auto out = net->forward(torch::randn({3, 1, 28, 28}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
}

TEST(Models, MnistCnnRegistersParametersInForwardOrder) {
  auto net = make_model(model("mnist_cnn"), InputShape{});
  auto params = net->named_parameters();
  ASSERT_EQ(params.size(), 8u);
  EXPECT_EQ(params[0].key(), "conv1.weight");
  EXPECT_EQ(params[7].key(), "fc2.bias");
}

TEST(Models, MnistCnnRejectsSizesNotDivisibleByFour) {
  InputShape s;
  s.height = 30;
  try {
    make_model(model("mnist_cnn"), s);
    FAIL() << "mnist_cnn took 30x28 images";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mnist_cnn needs images whose height and width are divisible by 4"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("got 30x28"), std::string::npos) << e.what();
  }
}

TEST(Models, MlpParameterCountAndOutputShape) {
  auto net = make_model(model("mlp", 0.5, 128), InputShape{});
  EXPECT_EQ(parameter_count(*net), 784 * 128 + 128 + 128 * 10 + 10);
  auto out = net->forward(torch::randn({5, 1, 28, 28}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{5, 10}));
}

TEST(Models, MlpFollowsHiddenAndShape) {
  InputShape s{3, 8, 8, 4};
  auto net = make_model(model("mlp", 0.0, 16), s);
  EXPECT_EQ(parameter_count(*net), 192 * 16 + 16 + 16 * 4 + 4);
  EXPECT_EQ(net->forward(torch::randn({2, 3, 8, 8})).sizes(), (std::vector<int64_t>{2, 4}));
}

TEST(Models, UnknownNameIsAnError) {
  try {
    make_model(model("resnet9000"), InputShape{});
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::string names;
    for (const std::string& n : model_names()) names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", n);
    EXPECT_EQ(what, fmt::format("/model/name: must be one of {}, got \"resnet9000\"", names));
    EXPECT_EQ(what.rfind("/model/name: must be one of \"mnist_cnn\", \"mlp\", ", 0), 0u) << what;
  }
}

// check_sync_fits_model (train/network.cpp) names the models without BatchNorm from the registry.
TEST(Models, BatchNormTraitIsWhetherTheModelHasBuffers) {
  for (const ModelEntry* m : registered_models()) {
    if (needs_a_file(*m)) continue;
    EXPECT_EQ(m->has_batch_norm, !make_model(model(m->name), InputShape{})->buffers().empty()) << m->name;
  }
  EXPECT_EQ(model_names(false).size() + model_names(true).size(), model_names().size());
  EXPECT_EQ(find_model("resnet20").has_batch_norm, true);
  EXPECT_EQ(find_model("mlp").has_batch_norm, false);
}

// Every registered model builds at 1 x 28 x 28, 10 classes, and gives logits per image.
TEST(Models, EveryRegisteredModelBuildsAndHasADescription) {
  ASSERT_GE(model_names().size(), 4u);
  for (const ModelEntry* m : registered_models()) {
    EXPECT_EQ(&find_model(m->name), m);
    EXPECT_GT(std::string(m->description).size(), 0u) << m->name;
    if (needs_a_file(*m)) continue;
    auto net = make_model(model(m->name), InputShape{});
    EXPECT_EQ(net->forward(torch::zeros({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10})) << m->name;
  }
}

TEST(Models, SchemaEnumIsTheRegistry) {
  auto schema = nlohmann::json::parse(config::schema_text());
  EXPECT_EQ(schema["properties"]["model"]["properties"]["name"]["enum"].get<std::vector<std::string>>(), model_names());
}

// The schema's "models" list of a model option (model.dropout, model.hidden; the resolved spec
// leaves the option out for the other models) is exactly the models whose behaviour it changes:
// the parameter count for hidden, a training-mode forward from the same weights for dropout.
TEST(Models, AModelOptionsSchemaListIsTheModelsItChanges) {
  const auto options = nlohmann::json::parse(config::schema_text())["properties"]["model"]["properties"];
  std::vector<std::string> hidden_changes, dropout_changes;
  const auto x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  for (const ModelEntry* m : registered_models()) {
    if (needs_a_file(*m)) continue;  // a saved module: its options are its own
    const std::string name = m->name;
    if (parameter_count(*make_model(model(name, 0.5, 8), InputShape{})) !=
        parameter_count(*make_model(model(name, 0.5, 16), InputShape{})))
      hidden_changes.push_back(name);
    std::vector<at::Tensor> outputs;
    for (const double p : {0.0, 0.9}) {
      torch::manual_seed(3);
      auto net = make_model(model(name, p), InputShape{});
      net->train();
      outputs.push_back(net->forward(x));
    }
    if (!torch::equal(outputs[0], outputs[1])) dropout_changes.push_back(name);
  }
  EXPECT_EQ(options["hidden"]["models"].get<std::vector<std::string>>(), hidden_changes);
  EXPECT_EQ(options["dropout"]["models"].get<std::vector<std::string>>(), dropout_changes);
}

class DropoutModes : public ::testing::TestWithParam<std::string> {};

TEST_P(DropoutModes, DropoutActsInTrainModeOnly) {
  torch::manual_seed(1);
  auto net = make_model(model(GetParam(), 0.5), InputShape{});
  auto x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  net->train();
  auto t1 = net->forward(x);
  auto t2 = net->forward(x);
  EXPECT_FALSE(torch::equal(t1, t2)) << "train mode should drop different units each call";
  net->eval();
  auto e1 = net->forward(x);
  auto e2 = net->forward(x);
  EXPECT_TRUE(torch::equal(e1, e2));
  EXPECT_FALSE(torch::equal(t1, e1));
}

INSTANTIATE_TEST_SUITE_P(Models, DropoutModes, ::testing::Values("mnist_cnn", "mlp"));

TEST(Models, ZeroDropoutTrainEqualsEval) {
  torch::manual_seed(2);
  auto net = make_model(model("mlp", 0.0), InputShape{});
  auto x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  net->train();
  auto t = net->forward(x);
  net->eval();
  EXPECT_TRUE(torch::allclose(t, net->forward(x)));
}

}  // namespace
}  // namespace ddplab::models
