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
#include "test_util.h"

namespace ddplab::train {
namespace {

// What one GraphedStep gave over a run of steps.
struct StepsTaken {
  std::vector<at::Tensor> losses, corrects, grad_sqs;  // per step, on the host
  std::vector<at::Tensor> params;                      // at the end, on the host
  bool captured = false;
  std::vector<bool> received;  // GradReducer's marks of the last step, after reset_received()
};

// mnist_cnn of `spec` (dropout 0.5) on its device, its reducer, and fixed random batches (the
// default generators seeded alike, so that the dropout masks follow alike too).
struct Rig {
  Rig(const config::ExperimentSpec& spec, const data::DatasetPair& data) : net(make_network(spec, data, /*rank=*/0)) {
    place_on_device(net, spec, distributed::World{});
    reducer = std::make_unique<distributed::GradReducer>(net.params, nullptr);
    torch::manual_seed(5);
    auto options = torch::TensorOptions().device(net.device);
    for (int k = 0; k < 4; ++k) {
      xs.push_back(torch::randn({16, 1, 28, 28}, options));
      ys.push_back(torch::randint(0, 10, {16}, options.dtype(torch::kLong)));
    }
  }
  // The Trainer's forward and backward, in short.
  GraphedStep::ForwardBackward forward_backward() {
    return [this](const at::Tensor& x, const at::Tensor& y) {
      auto logits = net.model->forward(x);
      auto loss = torch::cross_entropy_loss(logits, y);
      loss.backward();
      reducer->finalize();
      return std::make_pair(logits, loss);
    };
  }
  static double lr(int step) { return 0.01 * (1 + step % 3); }

  Network net;
  std::unique_ptr<distributed::GradReducer> reducer;
  std::vector<at::Tensor> xs, ys;
};

// `steps` steps, the lr changing every step; `eager`: every step run eagerly.
StepsTaken take_steps(const config::ExperimentSpec& spec, const data::DatasetPair& data, bool eager, int steps) {
  Rig rig(spec, data);
  StepsTaken taken;
  {
    GraphedStep step(rig.net, *rig.reducer, rig.forward_backward());
    for (int k = 0; k < steps; ++k) {
      if (k + 1 == steps) rig.reducer->reset_received();
      const auto out = step.step(rig.xs[k % 4], rig.ys[k % 4], Rig::lr(k), eager);
      taken.losses.push_back(out.loss.cpu());
      taken.corrects.push_back(out.correct.cpu());
      taken.grad_sqs.push_back(out.grad_sq.cpu());
    }
    taken.captured = step.captured();
    taken.received = rig.reducer->received_grad();
  }
  for (const auto& p : rig.net.params) taken.params.push_back(p.detach().cpu());
  return taken;
}

config::ExperimentSpec graphed_spec(const testing::Workspace& ws, const std::string& optimizer, bool cuda) {
  auto doc = ws.base_spec("graphed");
  doc["model"] = {{"name", "mnist_cnn"}, {"dropout", 0.5}};
  doc["optimizer"] = {{"name", optimizer}};
  doc["replicas"]["cuda_graph"] = true;
  if (cuda) doc["replicas"]["device"] = "cuda";
  return config::resolve(doc);
}

// The replays (on a GPU; on a CPU every step runs eagerly) give, bit for bit, the outputs and
// weights of the same steps all run eagerly, dropout masks included; and the reducer counts a
// replayed step's gradients as received, as the hooks of an eager one do.
TEST(GraphedStep, ReplayedStepsGiveTheBitsOfTheSameStepsRunEagerly) {
  testing::Workspace ws(/*train=*/64, /*test=*/16);
  for (const std::string optimizer : {"sgd", "adam"}) {
    const config::ExperimentSpec spec = graphed_spec(ws, optimizer, torch::cuda::is_available());
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

// What the graph is for: a replayed step dispatches the copies of its batch and the fills of the
// optimizer's numbers, not the forward's, backward's and update's operators one by one.
TEST(GraphedStep, OnCudaAReplayedStepDispatchesOnlyItsCopiesAndFills) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testing::Workspace ws(/*train=*/64, /*test=*/16);
  const config::ExperimentSpec spec = graphed_spec(ws, "adam", /*cuda=*/true);
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  Rig rig(spec, data);
  GraphedStep step(rig.net, *rig.reducer, rig.forward_backward());
  auto take = [&](int k) { step.step(rig.xs[k % 4], rig.ys[k % 4], Rig::lr(k), /*eager=*/false); };
  const int64_t eager = testing::operators_dispatched([&] { take(0); });
  for (int k = 1; k <= GraphedStep::kEagerSteps; ++k) take(k);  // the last one captured
  ASSERT_TRUE(step.captured());
  const int64_t replayed = testing::operators_dispatched([&] { take(GraphedStep::kEagerSteps + 1); });
  EXPECT_LE(replayed, 12) << "an eager step dispatched " << eager;
  EXPECT_GT(eager, 5 * replayed);
}

}  // namespace
}  // namespace ddplab::train
