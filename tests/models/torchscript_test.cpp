// Model "torchscript" (models/torchscript.cpp): a module scripted with the venv's Python, loaded
// and wrapped so that the trainer's machinery sees its own parameters and buffers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/models/models.h"
#include "models/own_models.h"
#include "test_util.h"

namespace ddplab::models {
namespace {

using testing::error_of;
using testing::TempDir;

ModelOptions script_options(const std::string& path) {
  ModelOptions m;
  m.name = "torchscript";
  m.torchscript = path;
  return m;
}

TEST(TorchscriptModel, ItsParametersAndBuffersAreTheModulesOwnUnderTheirNames) {
  TempDir dir;
  const std::string path = testing::save_scripted_cnn(dir);
  if (path.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  auto net = make_model(script_options(path), InputShape{});
  std::vector<std::string> names;
  for (const auto& p : net->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"features.0.weight", "features.0.bias", "features.1.weight",
                                             "features.1.bias", "head.weight", "head.bias"}));
  const auto buffers = net->named_buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0].key(), "features.1.running_mean");
  EXPECT_TRUE(net->is_training());
  // Training mode: BatchNorm updates the running statistics we hold, and backward fills our grads.
  const auto x = torch::randn({4, 1, 28, 28}) + 1;
  net->forward(x).sum().backward();
  EXPECT_GT(buffers[0].value().abs().sum().item<double>(), 0.0) << "running_mean is the module's, updated in place";
  for (const auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined());
  // A change through our tensors changes the module's forward; eval mode uses the running statistics.
  net->eval();
  torch::NoGradGuard no_grad;
  const auto before = net->forward(x);
  EXPECT_TRUE(torch::equal(before, net->forward(x)));
  net->named_parameters()["head.bias"].add_(1);
  EXPECT_TRUE(torch::allclose(net->forward(x), before + 1));
}

TEST(TorchscriptModel, AMissingFileIsASpecErrorNamingIt) {
  EXPECT_EQ(error_of([] { make_model(script_options("/nonexistent/net.pt"), InputShape{}); }),
            "/model/torchscript: no such file: \"/nonexistent/net.pt\"");
}

TEST(TorchscriptModel, AFileThatIsNotTorchscriptIsASpecErrorNamingIt) {
  TempDir dir;
  testing::write_file(dir.path() / "weights.pt", "not a zip archive");
  const std::string what = error_of([&] { make_model(script_options(dir.str("weights.pt")), InputShape{}); });
  EXPECT_EQ(what.rfind("/model/torchscript: \"" + dir.str("weights.pt") + "\" is not a TorchScript module", 0), 0u)
      << what;
}

// Was LibTorch's "... your checkpoint file is corrupted" for a file torch.save wrote.
TEST(TorchscriptModel, AFileSavedWithTorchSaveSaysToSaveItWithTorchJitSave) {
  TempDir dir;
  const std::vector<char> bytes = torch::pickle_save(torch::ones({2}));  // Python's torch.save format
  testing::write_file(dir.path() / "state.pt", std::string(bytes.begin(), bytes.end()));
  const std::string what = error_of([&] { make_model(script_options(dir.str("state.pt")), InputShape{}); });
  EXPECT_NE(what.find("was saved with torch.save"), std::string::npos) << what;
  EXPECT_NE(what.find("save it with torch.jit.save(torch.jit.script(model), path)"), std::string::npos) << what;
  EXPECT_EQ(what.find("corrupted"), std::string::npos) << what;
}

TEST(TorchscriptModel, AForwardThatDoesNotTakeTheImagesNamesTheFileAndTheShapes) {
  TempDir dir;
  const std::string rgb = testing::save_scripted_cnn(dir, 3, "rgb.pt");
  if (rgb.empty()) GTEST_SKIP() << "no Python with torch in " << DDPLAB_VENV_BIN;
  const std::string what = error_of([&] { make_model(script_options(rgb), InputShape{}); });
  EXPECT_EQ(
      what.rfind("/model/torchscript: the module in \"" + rgb + "\" cannot take the dataset's images [2, 1, 28, 28]: ",
                 0),
      0u)
      << what;
  // Images it takes, but logits for 10 classes where the dataset has 100.
  EXPECT_EQ(error_of([&] { make_model(script_options(rgb), InputShape{3, 28, 28, 100}); }),
            "/model/torchscript: the module in \"" + rgb +
                "\" must map the dataset's images [2, 3, 28, 28] to logits [2, 100], gives [2, 10]");
}

}  // namespace
}  // namespace ddplab::models
