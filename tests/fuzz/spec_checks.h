// What `ddplab run` relies on for every run that expand_sweep() returns, checked by the spec
// and override fuzz targets: a run id that is a safe directory name and unique, typed fields
// equal to the resolved JSON (no silent narrowing or wrap-around), and
// resolve(resolved) == resolved (workers resolve the spec.json they are given again, so a run
// must mean the same thing twice). A failed check aborts (DDPLAB_FUZZ_CHECK).
#pragma once
#include <cstddef>
#include <vector>

#include "ddplab/config/sweep.h"

namespace ddplab::fuzz {

// expand_sweep's max_runs in the fuzz targets: a spec of 100000 runs is valid but takes a minute
// to expand under the sanitizers, far past libFuzzer's -timeout; the limit's error path is still
// exercised.
constexpr size_t kMaxRuns = 64;

void check_runs(const std::vector<config::SweepRun>& runs);

}  // namespace ddplab::fuzz
