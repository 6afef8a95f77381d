#include "ddplab/train/optimizer.h"

#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/models/models.h"
#include "test_util.h"

namespace ddplab::train {
namespace {

NamedParameters named(const torch::nn::Module& m) {
  NamedParameters out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

config::OptimizerSpec sgd(double weight_decay, std::vector<config::WeightDecayGroup> groups) {
  config::OptimizerSpec s;
  s.name = config::OptimizerName::kSgd;
  s.lr = 0.1;
  s.momentum = 0.0;
  s.weight_decay = weight_decay;
  s.weight_decay_groups = std::move(groups);
  return s;
}

double decay_of(const torch::optim::Optimizer& o, size_t group) {
  return static_cast<const torch::optim::SGDOptions&>(o.param_groups()[group].options()).weight_decay();
}

std::shared_ptr<models::Model> tf_cnn() {
  models::ModelOptions m;
  m.name = "cifar_tf_cnn";
  return models::make_model(m, models::InputShape{3, 24, 24, 10});
}

// DDP leaves an unused parameter's .grad untouched (None) and torch.optim.SGD skips it: momentum
// and weight decay must not move it. GradReducer leaves it undefined; the optimizer skips it.
TEST(Optimizer, AParameterNoBackwardReachesIsNotMovedByMomentumOrWeightDecay) {
  auto used = torch::ones({4}, torch::requires_grad());
  auto unused = torch::ones({4}, torch::requires_grad());
  NamedParameters params{{"used", used}, {"unused", unused}};
  auto spec = sgd(/*weight_decay=*/0.1, {});
  spec.momentum = 0.9;
  auto optimizer = make_optimizer(spec, params);
  distributed::GradReducer sync({used, unused}, nullptr);
  for (int step = 0; step < 3; ++step) {
    sync.prepare_for_backward();
    (used * 2.0).sum().backward();
    sync.finalize();
    optimizer->step();
  }
  EXPECT_TRUE(torch::equal(unused, torch::ones({4}))) << unused;
  EXPECT_FALSE(torch::equal(used, torch::ones({4})));
}

TEST(Optimizer, WithoutGroupsOneGroupOfAllParametersInOrder) {
  auto net = tf_cnn();
  auto params = named(*net);
  auto o = make_optimizer(sgd(0.01, {}), params);
  ASSERT_EQ(o->param_groups().size(), 1u);
  ASSERT_EQ(o->param_groups()[0].params().size(), params.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(o->param_groups()[0].params()[i].is_same(params[i].second)) << params[i].first;
  EXPECT_DOUBLE_EQ(decay_of(*o, 0), 0.01);
}

TEST(Optimizer, TutorialDecayOnTheHiddenFcWeightsOnly) {
  auto net = tf_cnn();
  auto params = named(*net);
  auto o = make_optimizer(sgd(0.0, {{"^fc[12]\\.weight$", 0.004}}), params);
  ASSERT_EQ(o->param_groups().size(), 2u);
  const auto& decayed = o->param_groups()[0].params();
  ASSERT_EQ(decayed.size(), 2u);
  EXPECT_TRUE(decayed[0].is_same(net->named_parameters()["fc1.weight"]));
  EXPECT_TRUE(decayed[1].is_same(net->named_parameters()["fc2.weight"]));
  EXPECT_DOUBLE_EQ(decay_of(*o, 0), 0.004);
  EXPECT_EQ(o->param_groups()[1].params().size(), params.size() - 2);
  EXPECT_DOUBLE_EQ(decay_of(*o, 1), 0.0);
  // The decay acts on the group's parameters only: a zero gradient step shrinks fc1.weight alone.
  for (auto& [name, p] : params) p.mutable_grad() = torch::zeros_like(p);
  auto fc1 = net->named_parameters()["fc1.weight"].detach().clone();
  auto conv1 = net->named_parameters()["conv1.weight"].detach().clone();
  o->step();
  EXPECT_TRUE(torch::allclose(net->named_parameters()["fc1.weight"], fc1 * (1 - 0.1 * 0.004)));
  EXPECT_TRUE(torch::equal(net->named_parameters()["conv1.weight"], conv1));
}

TEST(Optimizer, FirstMatchingEntryWins) {
  auto net = tf_cnn();
  auto o = make_optimizer(sgd(0.5, {{"fc1", 0.1}, {"weight", 0.2}}), named(*net));
  ASSERT_EQ(o->param_groups().size(), 3u);
  EXPECT_EQ(o->param_groups()[0].params().size(), 2u);  // fc1.weight, fc1.bias
  EXPECT_EQ(o->param_groups()[1].params().size(), 4u);  // the other weights
  EXPECT_EQ(o->param_groups()[2].params().size(), 4u);  // the other biases
  EXPECT_DOUBLE_EQ(decay_of(*o, 2), 0.5);
  set_lr(*o, 0.3);
  for (const auto& g : o->param_groups()) EXPECT_DOUBLE_EQ(g.options().get_lr(), 0.3);
}

TEST(Optimizer, AnEntryThatTakesNoParameterNamesItsPointer) {
  auto net = tf_cnn();
  try {
    make_optimizer(sgd(0, {{"fc", 0.1}, {"^local3", 0.004}}), named(*net));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("/optimizer/weight_decay_groups/1/match: matches no parameter"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fc1.weight"), std::string::npos) << "lists the parameter names: " << msg;
    EXPECT_NE(msg.find("^local3"), std::string::npos) << msg;
  }
  try {
    make_optimizer(sgd(0, {{"fc", 0.1}, {"fc1", 0.004}}), named(*net));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("that an earlier entry has not taken"), std::string::npos) << e.what();
  }
}

TEST(Optimizer, GroupsWorkForAdamAndAdamW) {
  auto net = tf_cnn();
  for (const char* name : {"adam", "adamw"}) {
    auto s = sgd(0.0, {{"^fc3", 0.3}});
    s.name = config::parse_setting<config::OptimizerName>(name, "/optimizer/name");
    auto o = make_optimizer(s, named(*net));
    ASSERT_EQ(o->param_groups().size(), 2u) << name;
    const auto& options = o->param_groups()[0].options();
    double decay = std::string(name) == "adam" ? static_cast<const torch::optim::AdamOptions&>(options).weight_decay()
                                               : static_cast<const torch::optim::AdamWOptions&>(options).weight_decay();
    EXPECT_DOUBLE_EQ(decay, 0.3) << name;
  }
}

// ddplab's optimizers run multi-tensor kernels; each must compute exactly what LibTorch's
// `Reference` with `options` does: four steps of the same random gradients (parameter 2 gets none
// in step 1, so it keeps its state and, for Adam, its own step count), then a step after LibTorch's
// optimizer loads what ddplab's saved (the state is LibTorch's, so checkpoints are interchangeable).
template <class Reference, class Options>
void expect_matches_libtorch(const config::OptimizerSpec& s, const Options& options, const std::string& what) {
  torch::manual_seed(3);
  std::vector<at::Tensor> ours, theirs;
  NamedParameters named_ours;
  for (int i = 0; i < 3; ++i) {
    auto p = torch::randn({5, 4 + i});
    ours.push_back(p.clone().requires_grad_(true));
    theirs.push_back(p.clone().requires_grad_(true));
    named_ours.emplace_back("p" + std::to_string(i), ours.back());
  }
  auto optimizer = make_optimizer(s, named_ours);
  Reference reference(theirs, options);
  auto set_grads = [&](std::vector<at::Tensor>& other, int skip) {
    for (size_t i = 0; i < ours.size(); ++i) {
      auto g = static_cast<int>(i) == skip ? at::Tensor() : torch::randn(ours[i].sizes());
      ours[i].mutable_grad() = g.defined() ? g.clone() : g;
      other[i].mutable_grad() = g.defined() ? g.clone() : g;
    }
  };
  for (int step = 0; step < 4; ++step) {
    set_grads(theirs, step == 1 ? 2 : -1);
    optimizer->step();
    reference.step();
    for (size_t i = 0; i < ours.size(); ++i)
      ASSERT_TRUE(torch::equal(ours[i], theirs[i])) << what << ", step " << step << ", parameter " << i;
  }
  torch::serialize::OutputArchive out;
  optimizer->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  std::vector<at::Tensor> loaded_params;
  for (auto& p : ours) loaded_params.push_back(p.detach().clone().requires_grad_(true));
  Reference loaded(loaded_params, options);
  torch::serialize::InputArchive in;
  std::istringstream source(bytes.str());
  in.load_from(source);
  loaded.load(in);
  set_grads(loaded_params, -1);
  optimizer->step();
  loaded.step();
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(torch::equal(ours[i], loaded_params[i])) << what << ", after loading, parameter " << i;
}

TEST(Optimizer, SgdMatchesLibTorchSgdBitForBit) {
  struct Case {
    double momentum, weight_decay;
    bool nesterov;
  };
  for (const Case c : {Case{0.0, 0.0, false}, Case{0.9, 0.0, false}, Case{0.9, 5e-4, true}, Case{0.5, 1e-2, false}}) {
    auto s = sgd(c.weight_decay, {});
    s.momentum = c.momentum;
    s.nesterov = c.nesterov;
    const auto options =
        torch::optim::SGDOptions(s.lr).momentum(c.momentum).nesterov(c.nesterov).weight_decay(c.weight_decay);
    expect_matches_libtorch<torch::optim::SGD>(s, options,
                                               "momentum " + std::to_string(c.momentum) + " weight_decay " +
                                                   std::to_string(c.weight_decay) + (c.nesterov ? " nesterov" : ""));
  }
}

TEST(Optimizer, AdamAndAdamwMatchLibTorchsBitForBit) {
  for (const double weight_decay : {0.0, 1e-2}) {
    auto s = sgd(weight_decay, {});
    s.lr = 0.01;
    s.beta1 = 0.7;
    s.beta2 = 0.9;
    const std::string what = " weight_decay " + std::to_string(weight_decay);
    s.name = config::OptimizerName::kAdam;
    expect_matches_libtorch<torch::optim::Adam>(
        s, torch::optim::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(weight_decay),
        "adam" + what);
    s.name = config::OptimizerName::kAdamw;
    expect_matches_libtorch<torch::optim::AdamW>(
        s, torch::optim::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(weight_decay),
        "adamw" + what);
  }
}

// replicas.cuda_graph's form of the step (DeviceScalarStep): run() takes the lr prepare() wrote
// into the device tensor, not the group's (a capture would have frozen that one), and the steps
// follow the eager ones to rounding: the lr meets the update in another order.
TEST(Optimizer, TheDeviceScalarStepTakesTheLrPrepareWroteAndFollowsTheEagerStep) {
  struct Case {
    config::OptimizerName name;
    double momentum, weight_decay;
  };
  for (const Case c : {Case{config::OptimizerName::kSgd, 0.9, 5e-4}, Case{config::OptimizerName::kAdam, 0, 1e-2},
                       Case{config::OptimizerName::kAdamw, 0, 1e-2}}) {
    auto s = sgd(c.weight_decay, {});
    s.name = c.name;
    s.momentum = c.momentum;
    const std::string what = config::name(c.name);
    torch::manual_seed(3);
    std::vector<at::Tensor> eager_params, device_params;
    NamedParameters eager_named, device_named;
    for (int i = 0; i < 3; ++i) {
      auto p = torch::randn({5, 4 + i});
      eager_params.push_back(p.clone().requires_grad_(true));
      device_params.push_back(p.clone().requires_grad_(true));
      eager_named.emplace_back("p" + std::to_string(i), eager_params.back());
      device_named.emplace_back("p" + std::to_string(i), device_params.back());
    }
    auto eager = make_optimizer(s, eager_named);
    auto device = make_optimizer(s, device_named);
    DeviceScalarStep& device_step = device_scalar_step(*device);
    for (int step = 0; step < 5; ++step) {
      const double lr = 0.01 * (step + 1);
      for (size_t i = 0; i < eager_params.size(); ++i) {
        const auto g = torch::randn(eager_params[i].sizes());
        eager_params[i].mutable_grad() = g.clone();
        device_params[i].mutable_grad() = g.clone();
      }
      set_lr(*eager, lr);
      eager->step();
      set_lr(*device, 100.0);  // what run() must not read
      device_step.prepare(lr);
      device_step.run();
      for (size_t i = 0; i < eager_params.size(); ++i)
        EXPECT_TRUE(torch::allclose(device_params[i], eager_params[i], 1e-5, 1e-6))
            << what << ", step " << step << ", parameter " << i << ": "
            << (device_params[i] - eager_params[i]).abs().max().item<double>();
    }
    if (c.name == config::OptimizerName::kSgd) continue;
    // prepare() counts the steps, run() does not: Adam's bias corrections and a checkpoint see 5.
    const auto& state = device->state().at(device_params[0].unsafeGetTensorImpl());
    EXPECT_EQ(static_cast<const torch::optim::AdamParamState&>(*state).step(), 5) << what;
  }
}

// Adam's numbers are one per group: a parameter that missed a step would need its own.
TEST(Optimizer, TheDeviceScalarStepRefusesAGroupWhoseParametersTookDifferentSteps) {
  auto s = sgd(0, {});
  s.name = config::OptimizerName::kAdam;
  std::vector<at::Tensor> params{torch::randn({3}).requires_grad_(true), torch::randn({2}).requires_grad_(true)};
  auto optimizer = make_optimizer(s, {{"a", params[0]}, {"b", params[1]}});
  DeviceScalarStep& step = device_scalar_step(*optimizer);
  params[0].mutable_grad() = torch::ones({3});
  step.prepare(0.1);
  step.run();
  params[1].mutable_grad() = torch::ones({2});
  const std::string error = testing::error_of([&] { step.prepare(0.1); });
  EXPECT_NE(error.find("replicas.cuda_graph"), std::string::npos) << error;
  EXPECT_NE(error.find("took 2 and 1 steps"), std::string::npos) << error;
}

}  // namespace
}  // namespace ddplab::train
