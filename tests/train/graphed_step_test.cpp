#include "ddplab/train/graphed_step.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/network.h"
#include "ddplab/train/options.h"
#include "integration/integration_util.h"

namespace ddplab::train {
namespace {

// What one GraphedStep gave over a run of steps.
struct StepsTaken {
  std::vector<at::Tensor> losses, corrects, grad_sqs;  // per step, on the host
  std::vector<at::Tensor> params;                      // at the end, on the host
  bool captured = false;
  std::vector<bool> received;  // GradReducer's marks of the last step, after reset_received()
};

// `steps` steps of mnist_cnn (dropout 0.5) on fixed random batches, the lr changing every step,
// from the spec's seed and default generators seeded alike; `eager`: every step run eagerly.
StepsTaken take_steps(const config::ExperimentSpec& spec, const data::DatasetPair& data, bool eager, int steps) {
  Network net = make_network(spec, data, /*rank=*/0);
  place_on_device(net, spec, distributed::World{});
  distributed::GradReducer reducer(net.params, nullptr);
  torch::manual_seed(5);
  auto options = torch::TensorOptions().device(net.device);
  std::vector<at::Tensor> xs, ys;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(torch::randn({16, 1, 28, 28}, options));
    ys.push_back(torch::randint(0, 10, {16}, options.dtype(torch::kLong)));
  }
  StepsTaken taken;
  {
    GraphedStep step(net, reducer, [&](const at::Tensor& x, const at::Tensor& y) {
      auto logits = net.model->forward(x);
      auto loss = torch::cross_entropy_loss(logits, y);
      loss.backward();
      reducer.finalize();
      return std::make_pair(logits, loss);
    });
    for (int k = 0; k < steps; ++k) {
      if (k + 1 == steps) reducer.reset_received();
      const auto out = step.step(xs[k % 4], ys[k % 4], 0.01 * (1 + k % 3), eager);
      taken.losses.push_back(out.loss.cpu());
      taken.corrects.push_back(out.correct.cpu());
      taken.grad_sqs.push_back(out.grad_sq.cpu());
    }
    taken.captured = step.captured();
    taken.received = reducer.received_grad();
  }
  for (const auto& p : net.params) taken.params.push_back(p.detach().cpu());
  return taken;
}

// The replays (on a GPU; on a CPU every step runs eagerly) give, bit for bit, the outputs and
// weights of the same steps all run eagerly, dropout masks included; and the reducer counts a
// replayed step's gradients as received, as the hooks of an eager one do.
TEST(GraphedStep, ReplayedStepsGiveTheBitsOfTheSameStepsRunEagerly) {
  testing::Workspace ws(/*train=*/64, /*test=*/16);
  for (const std::string optimizer : {"sgd", "adam"}) {
    auto doc = ws.base_spec("graphed");
    doc["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.5}};
    doc["optimizer"] = {{"name", optimizer}};
    doc["replicas"]["cuda_graph"] = true;
    if (torch::cuda::is_available()) doc["replicas"]["device"] = "cuda";
    const config::ExperimentSpec spec = config::resolve(doc);
    const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
    const int steps = GraphedStep::kEagerSteps + 5;
    const StepsTaken eager = take_steps(spec, data, /*eager=*/true, steps);
    const StepsTaken graphed = take_steps(spec, data, /*eager=*/false, steps);
    EXPECT_FALSE(eager.captured);
    EXPECT_EQ(graphed.captured, torch::cuda::is_available()) << optimizer;
    for (int k = 0; k < steps; ++k) {
      EXPECT_TRUE(torch::equal(graphed.losses[k], eager.losses[k])) << optimizer << ", step " << k;
      EXPECT_TRUE(torch::equal(graphed.corrects[k], eager.corrects[k])) << optimizer << ", step " << k;
      EXPECT_TRUE(torch::equal(graphed.grad_sqs[k], eager.grad_sqs[k])) << optimizer << ", step " << k;
    }
    for (size_t i = 0; i < eager.params.size(); ++i)
      EXPECT_TRUE(torch::equal(graphed.params[i], eager.params[i])) << optimizer << ", parameter " << i;
    EXPECT_FALSE(torch::equal(eager.losses.front(), eager.losses.back())) << "the steps trained";
    EXPECT_EQ(graphed.received, std::vector<bool>(eager.params.size(), true)) << optimizer;
  }
}

}  // namespace
}  // namespace ddplab::train
