#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/models/cifar_tf_cnn.h"
#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

ModelOptions model(const std::string& name, bool sync_bn = false) {
  ModelOptions m;
  m.name = name;
  m.sync_bn = sync_bn;
  return m;
}

const InputShape kCifar24{3, 24, 24, 10};
const InputShape kCifar32{3, 32, 32, 10};

std::vector<std::string> parameter_names(const torch::nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.key());
  return names;
}

TEST(CifarTfCnn, HasTheTutorialParameterCountAt24x24) {
  auto net = make_model(model("cifar_tf_cnn"), kCifar24);
  // conv1 3*64*25+64, conv2 64*64*25+64, fc1 (64*6*6)*384+384, fc2 384*192+192, fc3 192*10+10
  EXPECT_EQ(parameter_count(*net), 4864 + 102464 + 885120 + 73920 + 1930);
  EXPECT_EQ(parameter_count(*net), 1068298);
  EXPECT_EQ(parameter_names(*net),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                      "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}));
  // 32x32 input (no crop): pools give 16 then 8.
  EXPECT_EQ(parameter_count(*make_model(model("cifar_tf_cnn"), kCifar32)), 1068298 - 885120 + 4096 * 384 + 384);
}

TEST(CifarTfCnn, ForwardBackwardOnAFakeBatch) {
  torch::manual_seed(3);
  auto net = make_model(model("cifar_tf_cnn"), kCifar24);
  auto x = torch::randn({4, 3, 24, 24});
  auto y = torch::tensor({0, 3, 9, 3}, torch::kLong);
  auto logits = net->forward(x);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{4, 10}));
  torch::cross_entropy_loss(logits, y).backward();
  for (const auto& p : net->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
  auto hundred = make_model(model("cifar_tf_cnn"), InputShape{3, 24, 24, 100});
  EXPECT_EQ(hundred->forward(x).size(1), 100);
}

TEST(CifarTfCnn, InitializedAsTheTutorial) {
  torch::manual_seed(1);
  auto net = make_model(model("cifar_tf_cnn"), kCifar24);
  auto params = net->named_parameters();
  auto w = params["fc1.weight"];
  EXPECT_LE(w.abs().max().item<double>(), 2 * 0.04) << "truncated at 2 std";
  EXPECT_NEAR(w.std().item<double>(), 0.04 * 0.88, 0.002);  // std of a normal truncated at 2 sd: 0.88 sd
  EXPECT_LE(params["conv1.weight"].abs().max().item<double>(), 2 * 5e-2);
  EXPECT_LE(params["fc3.weight"].abs().max().item<double>(), 2 / 192.0);
  EXPECT_EQ(params["conv1.bias"].abs().max().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(params["conv2.bias"], torch::full({64}, 0.1)));
  EXPECT_TRUE(torch::allclose(params["fc2.bias"], torch::full({192}, 0.1)));
}

TEST(CifarTfCnn, LocalResponseNormIsTfsFormula) {
  torch::manual_seed(5);
  auto x = torch::randn({2, 12, 3, 3}, torch::kDouble) * 20;
  auto out = tf_local_response_norm(x);
  // tf.nn.lrn: x_c / (bias + alpha * sum_{c' = c-4..c+4} x_c'^2)^beta, bias 1, alpha 0.001/9, beta 0.75.
  auto want = torch::empty_like(x);
  for (int64_t c = 0; c < 12; ++c) {
    auto sq = x.slice(1, std::max<int64_t>(0, c - 4), std::min<int64_t>(12, c + 5)).square().sum(1);
    want.select(1, c).copy_(x.select(1, c) / (1 + 0.001 / 9 * sq).pow(0.75));
  }
  EXPECT_TRUE(torch::allclose(out, want, 1e-12, 1e-12)) << (out - want).abs().max();
  // The values are large enough for the normalization to matter.
  EXPECT_FALSE(torch::allclose(out, x, 1e-3, 1e-3));
}

TEST(ResNet20, HasTheOptionAParameterCount) {
  auto net = make_model(model("resnet20"), kCifar32);
  // conv1 + bn1; stage 1: 3 blocks of 2 convs 16->16 + 2 BN; stage 2: 16->32 then 32->32 ...;
  // stage 3 likewise with 64; fc 64*10+10. Option A shortcuts have no parameters.
  const int64_t bn16 = 32, bn32 = 64, bn64 = 128;
  const int64_t stage1 = 3 * (2 * 16 * 16 * 9 + 2 * bn16);
  const int64_t stage2 = (16 * 32 * 9 + 32 * 32 * 9 + 2 * bn32) + 2 * (2 * 32 * 32 * 9 + 2 * bn32);
  const int64_t stage3 = (32 * 64 * 9 + 64 * 64 * 9 + 2 * bn64) + 2 * (2 * 64 * 64 * 9 + 2 * bn64);
  EXPECT_EQ(parameter_count(*net), 3 * 16 * 9 + bn16 + stage1 + stage2 + stage3 + 650);
  EXPECT_EQ(parameter_count(*net), 269722);
  // 19 BatchNorm layers, each with running_mean, running_var, num_batches_tracked.
  EXPECT_EQ(net->buffers().size(), 19u * 3);
  auto names = parameter_names(*net);
  EXPECT_EQ(names.front(), "conv1.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "layer2.0.conv1.weight"), names.end());
  EXPECT_EQ(names.back(), "fc.bias");
}

TEST(ResNet20, ForwardBackwardOnAFakeBatch) {
  for (bool sync : {false, true}) {
    torch::manual_seed(7);
    auto net = make_model(model("resnet20", sync), kCifar32);
    auto x = torch::randn({4, 3, 32, 32});
    auto logits = net->forward(x);
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{4, 10}));
    torch::cross_entropy_loss(logits, torch::tensor({1, 2, 3, 4}, torch::kLong)).backward();
    for (const auto& p : net->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    }
    // Training updated the running statistics; eval uses them and is deterministic.
    auto rm = net->named_buffers()["bn1.running_mean"];
    EXPECT_GT(rm.abs().sum().item<double>(), 0);
    EXPECT_EQ(net->named_buffers()["bn1.num_batches_tracked"].item<int64_t>(), 1);
    net->eval();
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(net->forward(x), net->forward(x)));
  }
}

TEST(ResNet20, SyncBatchNormOnOneReplicaComputesWhatPlainBatchNormDoes) {
  torch::manual_seed(11);
  auto plain = make_model(model("resnet20", false), kCifar32);
  torch::manual_seed(11);
  auto synced = make_model(model("resnet20", true), kCifar32);
  auto x = torch::randn({6, 3, 32, 32});
  auto y = torch::tensor({0, 1, 2, 3, 4, 5}, torch::kLong);
  auto a = plain->forward(x), b = synced->forward(x);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-4)) << (a - b).abs().max();
  torch::cross_entropy_loss(a, y).backward();
  torch::cross_entropy_loss(b, y).backward();
  auto pa = plain->named_parameters(), pb = synced->named_parameters();
  for (const auto& p : pa) {
    auto ga = p.value().grad(), gb = pb[p.key()].grad();
    EXPECT_TRUE(torch::allclose(ga, gb, 1e-3, 1e-4)) << p.key() << " " << (ga - gb).abs().max();
  }
}

}  // namespace
}  // namespace ddplab::models
