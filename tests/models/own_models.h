// The user's own models for the tests (docs/models.md): the built-in mnist_cnn written as
// model.layers, and a user-style CNN (not one of the built-in four) scripted with the project's
// venv Python and saved as TorchScript.
#pragma once
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace ddplab::testing {

// mnist_cnn (models/mnist_cnn.cpp) spelt out as model.layers, dropout `p`.
inline nlohmann::json mnist_cnn_layers(double p = 0.5) {
  using nlohmann::json;
  return json::array({{{"type", "conv"}, {"channels", 32}, {"kernel", 5}, {"padding", 2}},
                      {{"type", "relu"}},
                      {{"type", "max_pool"}, {"kernel", 2}},
                      {{"type", "conv"}, {"channels", 64}, {"kernel", 5}, {"padding", 2}},
                      {{"type", "relu"}},
                      {{"type", "max_pool"}, {"kernel", 2}},
                      {{"type", "flatten"}},
                      {{"type", "linear"}, {"features", 1024}},
                      {{"type", "relu"}},
                      {{"type", "dropout"}, {"p", p}},
                      {{"type", "linear"}, {"features", 10}}});
}

// conv3x3 (in_channels -> 8) -> BatchNorm -> ReLU -> maxpool2 -> flatten -> linear (8*14*14 -> 10):
// logits for 28 x 28 images of `in_channels` channels.
inline constexpr const char* kScriptedCnn = R"(import sys
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, in_channels: int):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


torch.manual_seed(0)
torch.jit.script(Net(int(sys.argv[2]))).save(sys.argv[1])
)";

// The venv's Python (.venv/bin/python, which has torch), or "" when it is not there.
inline std::string venv_python() {
  const std::filesystem::path python = std::filesystem::path(DDPLAB_VENV_BIN) / "python";
  if (!std::filesystem::exists(python)) return "";
  return run_command(python.string() + " -c 'import torch'").exit_code == 0 ? python.string() : "";
}

// Saves kScriptedCnn for `in_channels` as <dir>/<name>; returns its path, or "" without Python
// and torch (the caller skips).
inline std::string save_scripted_cnn(const TempDir& dir, int in_channels = 1, const std::string& name = "net.pt") {
  const std::string python = venv_python();
  if (python.empty()) return "";
  write_file(dir.path() / "net.py", kScriptedCnn);
  const std::string path = (dir.path() / name).string();
  const auto made =
      run_command(fmt::format("{} {} {} {}", python, (dir.path() / "net.py").string(), path, in_channels));
  if (made.exit_code != 0) throw std::runtime_error("scripting the test CNN failed: " + made.output);
  return path;
}

}  // namespace ddplab::testing
