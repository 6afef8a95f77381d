#include "ddplab/train/subnormal_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/train/optimizer.h"

namespace ddplab::train {
namespace {

// Parameter "quiet" [1000] gets a gradient of 1e-4 at the first step and exactly 0 after it (a
// unit that stopped firing); "busy" [10] gets 1 at every step; "dead" [100] exactly 0 at every
// step, so its state stays 0, which is not denormal. Returns the optimizer after `steps`.
std::unique_ptr<torch::optim::Optimizer> trained(const config::OptimizerSpec& spec, const NamedTensors& named,
                                                 int steps) {
  auto optimizer = make_optimizer(spec, named);
  for (int s = 0; s < steps; ++s) {
    named[0].second.mutable_grad() = torch::full({1000}, s == 0 ? 1e-4 : 0.0);
    named[1].second.mutable_grad() = torch::ones({10});
    named[2].second.mutable_grad() = torch::zeros({100});
    optimizer->step();
  }
  return optimizer;
}

NamedTensors quiet_and_busy() {
  return {{"quiet", torch::zeros({1000}).requires_grad_()},
          {"busy", torch::zeros({10}).requires_grad_()},
          {"dead", torch::zeros({100}).requires_grad_()}};
}

// SGD's momentum of 0.9 takes 1e-4 below the smallest normal float after 742 steps of zero gradient
// and keeps it there (0.9 x 4 units in the last place rounds back to 4): the quickstart's denormals.
TEST(SubnormalState, SgdMomentumWhereTheGradientStaysZeroIsCountedAndNamed) {
  config::OptimizerSpec sgd;
  sgd.lr = 0.01;
  sgd.momentum = 0.9;
  const auto named = quiet_and_busy();
  const SubnormalState early = subnormal_state(*trained(sgd, named, 700), named);
  EXPECT_EQ(early.values, 1110);
  EXPECT_EQ(early.subnormal, 0);
  EXPECT_FALSE(subnormal_note(early, 1).has_value());
  const SubnormalState late = subnormal_state(*trained(sgd, named, 2000), named);
  EXPECT_EQ(late.subnormal, 1000);
  EXPECT_EQ(late.top_name, "quiet");
  EXPECT_EQ(late.top_values, 1000);
  const auto note = subnormal_note(late, 3);
  ASSERT_TRUE(note.has_value());
  EXPECT_NE(note->find("epoch 3: 1000 of the optimizer state's 1110 values are denormal floats (90.1%"),
            std::string::npos)
      << *note;
  EXPECT_NE(note->find("1000 of them in quiet's 1000"), std::string::npos) << *note;
  EXPECT_NE(note->find("replicas.flush_denormal=true"), std::string::npos) << *note;
}

// Adam's and AdamW's two moments (betas 0.9 and 0.9 here) sink the same way; both count.
TEST(SubnormalState, AdamsMomentsCountToo) {
  for (const auto name : {config::OptimizerName::kAdam, config::OptimizerName::kAdamw}) {
    config::OptimizerSpec adam;
    adam.name = name;
    adam.lr = 0.01;
    adam.beta1 = 0.9;
    adam.beta2 = 0.9;
    const auto named = quiet_and_busy();
    const SubnormalState state = subnormal_state(*trained(adam, named, 2000), named);
    EXPECT_EQ(state.values, 2 * 1110) << config::name(name);
    EXPECT_EQ(state.subnormal, 2 * 1000) << config::name(name);
    EXPECT_EQ(state.top_name, "quiet") << config::name(name);
  }
}

TEST(SubnormalState, TheNoteStartsAtOnePercentOfTheState) {
  SubnormalState state;
  state.values = 1000;
  state.subnormal = 9;
  EXPECT_FALSE(subnormal_note(state, 1).has_value());
  state.subnormal = 10;
  EXPECT_TRUE(subnormal_note(state, 1).has_value());
  EXPECT_FALSE(subnormal_note(SubnormalState{}, 1).has_value());
}

}  // namespace
}  // namespace ddplab::train
