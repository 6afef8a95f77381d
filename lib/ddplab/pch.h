// Precompiled header for every ddplab target (built once by ddplab_pch, reused by the layers,
// the CLI and the tests): the LibTorch headers that almost every translation unit pulls in,
// parsed once instead of once per file, plus nlohmann/json and fmt.
#pragma once
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
