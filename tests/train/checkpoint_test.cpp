#include "ddplab/train/checkpoint.h"

#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "test_util.h"

namespace ddplab::train {
namespace {

namespace fs = std::filesystem;
using testing::FileSizeLimit;
using testing::TempDir;

struct ModelAndOptimizer {
  torch::nn::Linear model{torch::nn::LinearOptions(4, 3)};
  torch::optim::SGD sgd{model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};
};

TEST(Checkpoint, SaveThenLoadRestoresModelAndState) {
  TempDir tmp;
  const fs::path file = tmp.path() / "checkpoint.pt";
  ModelAndOptimizer a;
  CheckpointState state;
  state.epochs_done = 2;
  state.global_step = 40;
  state.records = 2;
  state.rng_states = {torch::arange(5, torch::kUInt8)};
  save_checkpoint(file, *a.model, a.sgd, state);
  ModelAndOptimizer b;
  CheckpointState loaded = load_checkpoint(file, *b.model, b.sgd);
  EXPECT_EQ(loaded.epochs_done, 2);
  EXPECT_EQ(loaded.global_step, 40);
  ASSERT_EQ(loaded.rng_states.size(), 1u);
  EXPECT_TRUE(torch::equal(loaded.rng_states[0], state.rng_states[0]));
  EXPECT_TRUE(torch::equal(a.model->weight, b.model->weight));
}

// Every rank of an N-GPU run loads rank 0's checkpoint, saved from cuda:0. Without mapping,
// LibTorch restores each tensor where it was saved and Module::load moves rank r's parameters
// there (set_data). With one GPU the same mistake shows as a checkpoint saved on the CPU pulling
// a CUDA model's parameters and momentum buffers back to the CPU.
TEST(Checkpoint, OnCudaLoadsOntoTheModelsDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  TempDir tmp;
  const fs::path file = tmp.path() / "checkpoint.pt";
  ModelAndOptimizer a;
  a.model->weight.sum().backward();
  a.sgd.step();  // a momentum buffer to save
  CheckpointState state;
  state.rng_states = {torch::arange(16, torch::kUInt8)};
  save_checkpoint(file, *a.model, a.sgd, state);
  ModelAndOptimizer b;
  b.model->to(torch::Device(torch::kCUDA, 0));
  torch::optim::SGD sgd{b.model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};
  CheckpointState loaded = load_checkpoint(file, *b.model, sgd);
  for (const auto& p : b.model->parameters()) EXPECT_TRUE(p.is_cuda()) << p.device();
  EXPECT_TRUE(torch::equal(a.model->weight, b.model->weight.cpu()));
  for (const auto& [key, param_state] : sgd.state()) {
    const auto& buffer = static_cast<torch::optim::SGDParamState&>(*param_state).momentum_buffer();
    EXPECT_TRUE(buffer.is_cuda()) << buffer.device();
  }
  ASSERT_EQ(loaded.rng_states.size(), 1u);
  EXPECT_TRUE(loaded.rng_states[0].device().is_cpu()) << "generator states are CPU tensors";
}

TEST(Checkpoint, AFullDiskKeepsThePreviousCheckpointAndNoTempFile) {
  TempDir tmp;
  const fs::path file = tmp.path() / "checkpoint.pt";
  ModelAndOptimizer a;
  CheckpointState first;
  first.epochs_done = 1;
  save_checkpoint(file, *a.model, a.sgd, first);
  const auto size = fs::file_size(file);
  {
    torch::NoGradGuard no_grad;
    a.model->weight.add_(1.0);
  }
  CheckpointState second;
  second.epochs_done = 2;
  std::string msg;
  {
    FileSizeLimit limit(size / 2);  // the new checkpoint cannot be written whole
    try {
      save_checkpoint(file, *a.model, a.sgd, second);
    } catch (const std::runtime_error& e) {
      msg = e.what();
    }
  }
  EXPECT_EQ(msg.rfind(file.string() + ": write failed: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("the previous version is kept"), std::string::npos) << msg;
  for (const auto& entry : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(entry.path().filename(), "checkpoint.pt") << "no partial temp file is left behind";
  ModelAndOptimizer b;
  EXPECT_EQ(load_checkpoint(file, *b.model, b.sgd).epochs_done, 1) << "the previous checkpoint still loads";
}

}  // namespace
}  // namespace ddplab::train
