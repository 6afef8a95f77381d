// Build facts baked in at configure time, for `--version` and manifest.json.
#pragma once
#include <string>

namespace ddplab {
const char* version();        // "0.1.0"
const char* git_sha();        // short sha of the source tree, "unknown" outside git
std::string torch_version();  // "2.13.0"
std::string compiler();       // "gcc 12.2.0"
bool built_with_cuda();
bool built_with_nccl();     // a CUDA LibTorch and nccl.h were found at build time (ProcessGroupNCCL)
const char* schema_json();  // the JSON Schema of the experiment spec (lib/ddplab/config/schema.json)
}  // namespace ddplab
