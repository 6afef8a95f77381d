// The all-reduce probe of `ddplab plan` (plan/probe.h, docs/planner.md): T_comm's bandwidth and
// latency measured on the calibration's backend with real processes, not fitted from step times.
//
// For each replica count N it starts N processes of this binary through ddplab's launcher
// (launch/launcher.h), as a run's ranks are started: `ddplab worker SPEC --allreduce-probe FILE`
// (an option hidden from --help). Each rank joins a process group on the spec's backend
// (replicas.backend: gloo here) and all-reduces float32 tensors of every size of
// plan::probe_sizes() on the process group's device: one warm-up, then plan::kProbeRepetitions
// timed all-reduces, each after a barrier. Per size the median over the repetitions, the slowest
// rank's (an all-reduce MAX of the medians), is written by rank 0 to FILE. The ranks' logs and
// files are under <dir>/probe/N<n>/.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/plan/probe.h"

namespace ddplab::runner {

// plan::find_probe(dirs), saying on stdout which probe.json it reuses.
std::optional<plan::AllReduceProbe> reuse_probe(const std::vector<std::filesystem::path>& dirs);

// plan::probe_file(dir) as it is when it exists (reused, not rerun); else the probe at each of
// `counts` (those below 2 skipped) on the backend and device of the spec file `spec_path`, fitted
// (plan::fit_allreduce) and written as probe.json into `dir`. nullopt, with the reason on stderr,
// when a launch failed or the points cannot be fitted (no count of 2 or more).
std::optional<plan::AllReduceProbe> ensure_probe(const std::filesystem::path& dir, const std::string& spec_path,
                                                 const std::vector<int>& counts);

// `ddplab worker SPEC --allreduce-probe FILE`: this process's rank of the probe; the exit code.
int probe_worker_command(const std::string& spec_path, const std::string& out_file);

}  // namespace ddplab::runner
