// A run's identity by content: the files its spec names that change what it trains, hashed.
//
//   model.torchscript            the saved module's file
//   dataset.root's data files    those data/ reads (config::dataset_files_read: IDX raw or .gz)
//
// RunLog::create records them in the manifest, {"inputs": {"<path>": "<sha256 hex>", ...}}, paths
// as the spec gives them; spec_changes() compares a run directory's record with the files as they
// are now, so a replaced file refuses a resume or a sweep's skip as a changed spec field does
// ("my_net.pt: content changed, sha256 <recorded> -> <now>"). A run directory whose manifest
// has no "inputs" (written before they were recorded) is not compared, nor is a file that cannot
// be read now (the run itself would then stop with the reader's error).
//
// Cost: one SHA-256 pass over the files, once per file per process (cached by path, size and
// modification time): Fashion-MNIST's four .gz files (30 MB) take about 0.1 s (docs/spec.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"

namespace ddplab::rundir {

// {"<path>": "<sha256 hex>"} of the spec's input files (above); a file that cannot be read is left
// out.
nlohmann::json input_hashes(const config::ExperimentSpec& spec);

// One line per path whose hash differs between `recorded` and `now` (input_hashes), in path order:
// "<path>: content changed, sha256 <recorded> -> <now>"; a path only one of them has reads
// "(not read)" on the other side. A path missing from `now` is not compared (cannot be read).
std::vector<std::string> input_changes(const nlohmann::json& recorded, const nlohmann::json& now);

}  // namespace ddplab::rundir
