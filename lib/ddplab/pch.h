// Precompiled header for ddplab_lib and the tests: the LibTorch headers that almost
// every translation unit pulls in, parsed once per target instead of once per file.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
