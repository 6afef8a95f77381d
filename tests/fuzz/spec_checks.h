// What `ddplab run` relies on for every run that expand_sweep() returns, checked by the spec
// and override fuzz targets: a run id that is a safe directory name and unique, typed fields
// equal to the resolved JSON (no silent narrowing or wrap-around), and
// resolve(resolved) == resolved (workers resolve the spec.json they are given again, so a run
// must mean the same thing twice). A failed check aborts (DDPLAB_FUZZ_CHECK).
#pragma once
#include <vector>

#include "ddplab/spec/sweep.h"

namespace ddplab::fuzz {

void check_runs(const std::vector<spec::SweepRun>& runs);

}  // namespace ddplab::fuzz
