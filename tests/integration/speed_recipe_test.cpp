// The speed recipes (experiments/mnist_speed.json for one GPU, experiments/fashion_speed.json its
// Fashion-MNIST twin for the CPU; docs/performance.md "The speed recipe"): the twin, as shipped
// but for the data, trains through ddplab's command line with its batches made on the device (here
// the CPU), the path the GPU recipe takes, and prewarmed as the recipe is; and the two differ in
// their dataset and name alone.
#include <string>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "integration/integration_util.h"

namespace ddplab {
namespace {

TEST(SpeedRecipe, TheFashionTwinTrainsWithItsBatchesMadeOnTheDevice) {
  testing::Workspace ws(/*train=*/4096, /*test=*/500);
  auto doc = config::load_json_file(std::string(DDPLAB_SOURCE_DIR) + "/experiments/fashion_speed.json");
  doc["dataset"] = {{"name", "idx"}, {"root", ws.data().string()}, {"placement", "device"}};
  doc["replicas"]["threads"] = 1;
  doc["output"] = ws.out().string();
  const auto run = testing::run_spec(ws, doc, "fashion_speed");
  ASSERT_EQ(run.command.exit_code, 0) << run.command.output;
  ASSERT_EQ(run.records.size(), doc["epochs"].get<size_t>());
  EXPECT_LT(run.records.back()["train_loss"].get<double>(), run.records.front()["train_loss"].get<double>());
  EXPECT_GT(run.records.back()["test_acc"].get<double>(), 0.9) << "each class is a bright band: easy to learn";
  EXPECT_NE(run.command.output.find("replicas.prewarm_steps: 2 forward and backward passes"), std::string::npos)
      << run.command.output;
}

TEST(SpeedRecipe, TheTwinDiffersFromTheRecipeInItsDatasetAndNameAlone) {
  const std::string dir = std::string(DDPLAB_SOURCE_DIR) + "/experiments/";
  auto recipe = config::load_json_file(dir + "mnist_speed.json"),
       twin = config::load_json_file(dir + "fashion_speed.json");
  EXPECT_EQ(recipe["dataset"]["name"], "mnist");
  EXPECT_EQ(twin["dataset"]["name"], "fashion-mnist");
  for (auto* doc : {&recipe, &twin}) {
    doc->erase("dataset");
    doc->erase("name");
  }
  EXPECT_EQ(recipe, twin);
}

}  // namespace
}  // namespace ddplab
