// `ddplab plan`: from a calibration (calibration.h), predictions for every cell of a grid of
// replica counts x global batches: step time, steps and time to the target, device-seconds,
// scaling efficiency, the two baselines, flags where the models extrapolate, and the
// recommendation (fastest; cheapest in device-seconds within kCheapestWithin of the fastest).
// Written as plan.json (with a hash of its predictions, so that a later `ddplab plan --check`
// shows they came first) and plan.md. docs/planner.md describes the models and their assumptions.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/plan/calibration.h"
#include "ddplab/plan/fit.h"
#include "ddplab/report/report.h"

namespace ddplab::plan {

struct GridCell {
  int replicas = 1;
  int64_t global_batch = 0;
};
// The cells of "replicas=1,2,4" "batch=64,128" (global batches; each must divide by every replica
// count): their product, by replicas then batch. Throws ddplab::Error naming the argument that
// does not read, a missing axis, or a batch that a replica count does not divide.
std::vector<GridCell> parse_grid(const std::vector<std::string>& args);

// The relative distance from the fastest predicted time within which the cheapest cell is chosen.
constexpr double kCheapestWithin = report::kCheapestWithin;
// A global batch above this many B_crit is flagged: steps there barely fall, and the fit is least
// constrained.
constexpr double kFarAboveCriticalBatch = 4;

struct CellPlan {
  int replicas = 1;
  int64_t global_batch = 0;
  double per_replica_batch = 0;
  double step_s = 0;       // predicted T_step(N, B / N)
  double steps = 0;        // predicted steps to the target (the estimate Plan::steps_source names)
  double steps_fit = 0;    // McCandlish's fit at B (NaN without one)
  double steps_noise = 0;  // the noise-scale estimate at B (NaN without one)
  double evaluations = 0;  // evaluations (one per epoch) on the way to the target
  double time_to_target_s = 0;
  double device_s = 0;             // time_to_target_s x replicas
  double images_per_s = 0;         // B / step_s
  double scaling_efficiency = 0;   // step_s(1, b) / step_s(N, b): throughput over N x one replica's
  double linear_ttt_s = 0;         // baseline: linear speedup from the reference calibration cell
  double throughput_ttt_s = 0;     // baseline: throughput only, the reference's epochs at this cell's speed
  bool calibrated = false;         // a calibration run measured this very cell (not held out)
  std::vector<std::string> flags;  // where the models extrapolate
};

// One calibration run's step time and exposed communication per step, measured and as the fitted
// step-time model gives them back (the predicted exposed part is what comm_wait_s measures).
struct FitRow {
  std::string run;
  int replicas = 1;
  double per_replica_batch = 0;
  double step_s = 0, fitted_step_s = 0;
  double comm_wait_s = 0, fitted_exposed_s = 0;
};

struct Plan {
  Target target;
  std::vector<CellPlan> cells;
  StepTimeModel step_time;
  std::vector<FitRow> step_fit;  // per timed calibration run
  std::optional<report::BatchTradeoffFit> steps_fit;
  std::string steps_fit_refusal;               // why there is no fit, when there is none
  std::string steps_source;                    // "McCandlish fit" or "noise scale"
  double steps_gap = 0;                        // largest |fit - noise| / fit over the cells (NaN without both)
  int noise_reference_runs = 0;                // runs whose B_simple trajectory gives the noise-scale estimate
  std::map<int64_t, double> calibrated_steps;  // global batch -> mean steps to the target over seeds
  // The baselines' reference: the calibration cell with the fewest replicas, then the smallest
  // batch, that reached the target; its mean time and epochs to the target.
  GridCell reference;
  double reference_ttt_s = 0, reference_epochs = 0;
  double samples_per_epoch = 0;
  std::optional<size_t> fastest, cheapest;  // indices into cells
  std::vector<std::string> notes;           // runs left out and why, model caveats
  std::vector<std::string> calibration_runs;
  std::string hash;  // predictions_hash of the cells' predictions

  nlohmann::json to_json() const;
};

// Fits both models on `calibration` and predicts every cell. Throws ddplab::Error naming what is
// missing when the calibration cannot support the grid: no replica count timed at 2 per-replica
// batches, or no steps estimate (neither 2 global batches that reached the target with samples
// growing with the batch, nor a run at 2+ replicas with the noise scale that reached it).
Plan make_plan(const Calibration& calibration, const std::vector<GridCell>& grid);

// FNV-1a (64 bit) of the predictions (replicas, batch, step time, steps, time to target and the
// baselines of every cell, as compact JSON with numbers printed to 6 significant digits), in hex.
std::string predictions_hash(const std::vector<CellPlan>& cells);
nlohmann::json predictions_json(const std::vector<CellPlan>& cells);
// The FNV-1a hash of predictions_json's compact text (what predictions_hash computes).
std::string hash_of(const nlohmann::json& predictions);

std::string render_plan_markdown(const Plan& plan);

// Writes plan.json and plan.md into `out_dir` (created); returns the files.
std::vector<std::filesystem::path> write_plan(const Plan& plan, const std::filesystem::path& out_dir);

}  // namespace ddplab::plan
