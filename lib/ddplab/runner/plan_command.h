// `ddplab plan` (plan/plan.h, docs/planner.md):
//   ddplab plan SPEC --grid replicas=1,2 batch=64,128,256     decide and run a calibration sweep
//                                                             (calibration_specs), then plan
//   ddplab plan --grid ... --calibration DIR...               plan from runs that exist
//   ddplab plan --check plan.json RUN_DIR...                  score a plan on runs done after it
// plan.json, plan.md and plan.html go to --out (default: <SPEC's output>/<name>-plan, or the
// first calibration directory); check.json and check.md next to plan.json unless --out.
// The all-reduce probe (allreduce_probe.h) runs after a calibration sweep, or with --probe on a
// calibration given, unless a calibration directory holds probe.json already (then it is reused).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/plan/plan.h"

namespace ddplab::runner {

struct PlanRequest {
  std::vector<std::string> inputs;       // SPEC, or with --check the run directories
  std::vector<std::string> grid;         // --grid replicas=... batch=...
  std::vector<std::string> calibration;  // --calibration DIR...
  std::string check;                     // --check plan.json
  std::string out;                       // --out
  double target_loss = 0;                // --target-loss (0: not given)
  double target_acc = 0;                 // --target-acc (0: not given)
  bool probe = false;                    // --probe: probe all-reduces for a calibration given
};
int plan_command(const PlanRequest& request);

// The calibration sweep for `grid` from the spec document `doc` (overrides applied), as spec
// documents to run one after another, each a sweep of its own, all with output `dir`:
//   <name>-steps: the smallest grid batch and the grid batch nearest the geometric mean of the
//     smallest and largest (the larger of two equally near; 2 global batches) run to the end of the
//     spec's epochs, at the smallest grid replica count of 2 or more (so the noise scale is logged;
//     1 when the grid has no other), repeats 1, log.every_steps on (10 unless it or
//     log.eval_every_steps is set);
//   <name>-timing-N<n>: for each grid replica count n up to `cores` (the replicas this machine
//     runs at once: its cores, or its GPUs for CUDA over NCCL), every per-replica batch of the grid
//     at n that the steps runs do not time, 1 epoch of at most 40 steps of the largest
//     (dataset.train_limit), repeats 1: the compute curve (plan/fit.h) then passes through each
//     batch the grid asks about.
// Real processes throughout (replicas.mode as the spec has it).
std::vector<nlohmann::json> calibration_specs(const nlohmann::json& doc, const std::vector<plan::GridCell>& grid,
                                              const std::string& dir, int cores);

}  // namespace ddplab::runner
