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

// Two user-style modules that ddplab must not mirror naively, scripted and saved as argv[2]:
//   tied   flatten -> embed (784 -> 16) -> fc1 (16 -> 16) -> fc2 (16 -> 16) -> head (16 -> 10),
//          ReLUs between, fc2.weight the same tensor as fc1.weight (one tensor, two names, as a
//          tied embedding and output layer). With argv[3], plain PyTorch's reference for it: two
//          SGD steps (lr 0.1, momentum 0.9) of the whole batch of 8 images, "x" (flat), "y", and
//          the parameters after them by name ("params", as named_parameters() lists them), JSON.
//   mixed  flatten -> body (784 -> 16, float32) -> head (16 -> 10, float64): two dtypes.
inline constexpr const char* kScriptedTiedAndMixed = R"(import json
import sys
import torch
from torch import nn


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(784, 16)
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc2.weight = self.fc1.weight
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = torch.relu(self.embed(torch.flatten(x, 1)))
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(h)))))


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(784, 16)
        self.head = nn.Linear(16, 10).double()

    def forward(self, x):
        return self.head(torch.relu(self.body(torch.flatten(x, 1))).double()).float()


torch.manual_seed(0)
torch.jit.script(Tied() if sys.argv[1] == "tied" else Mixed()).save(sys.argv[2])
if len(sys.argv) > 3:
    x = torch.randn(8, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    y = torch.arange(8)
    model = torch.jit.load(sys.argv[2])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    params = {n: p.detach().reshape(-1).tolist() for n, p in model.named_parameters()}
    with open(sys.argv[3], "w") as f:
        json.dump({"x": x.reshape(-1).tolist(), "y": y.tolist(), "params": params, "names": list(params)}, f)
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

// Saves kScriptedTiedAndMixed's `kind` ("tied" or "mixed") as <dir>/<kind>.pt, and with
// `reference` non-empty plain PyTorch's reference there; returns the module's path, or "" without
// Python and torch (the caller skips).
inline std::string save_scripted_own(const TempDir& dir, const std::string& kind, const std::string& reference = "") {
  const std::string python = venv_python();
  if (python.empty()) return "";
  write_file(dir.path() / "own.py", kScriptedTiedAndMixed);
  const std::string path = (dir.path() / (kind + ".pt")).string();
  const auto made =
      run_command(fmt::format("{} {} {} {} {}", python, (dir.path() / "own.py").string(), kind, path, reference));
  if (made.exit_code != 0) throw std::runtime_error("scripting the " + kind + " module failed: " + made.output);
  return path;
}

}  // namespace ddplab::testing
