// `ddplab plan`: from a calibration (calibration.h), predictions for every cell of a grid of
// replica counts x global batches: step time, steps and time to the target, device-seconds,
// scaling efficiency, the two baselines, flags where the models extrapolate, the recommendation
// (fastest; cheapest in device-seconds within kCheapestWithin of the fastest) and the seed
// question in the plan's terms (DoubledBatch). Written as plan.json, sealed (seal_of: a hash of
// all of it, its creation time and the spec held-out runs must share included, so that a later
// `ddplab plan --check` shows that it came first and was not edited), plan.md and plan.html
// (self-contained, with the chart of predicted time to target). docs/planner.md describes the
// models and their assumptions.
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
#include "ddplab/plan/probe.h"
#include "ddplab/report/report.h"
#include "ddplab/report/svg.h"

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
// A cell's lr (the calibration spec's rule at its global batch) is flagged when it lies outside
// the lrs of the calibration runs that reached the target, or more than this factor from the
// nearest of them: the steps model was fitted at those lrs and does not know another.
constexpr double kLrFarFactor = 2;

// A timed calibration run whose host was busier than this (mean CPU wait or steal, percent) timed
// the load as well as the step: the cells whose step time its replica count sets are flagged, and
// so is a scaling efficiency above 1 that it explains.
constexpr double kLoadedTimingPct = report::kHostLoadFlagPts;

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
  double device_s = 0;            // time_to_target_s x replicas
  double images_per_s = 0;        // B / step_s
  double scaling_efficiency = 0;  // step_s(1, b) / step_s(N, b): throughput over N x one replica's
  double linear_ttt_s = 0;        // baseline: linear speedup from the reference calibration cell
  double throughput_ttt_s = 0;    // baseline: throughput only, the reference's epochs at this cell's speed
  // The 80% prediction interval of one run's time to target (PredictionSpread); NaN without one.
  double ttt_low_s = 0, ttt_high_s = 0;
  // The time to target by each steps rule alone (NaN where that rule has no estimate): the scores
  // of `--check` compare the plan's choice between them with each.
  double fit_ttt_s = 0, noise_ttt_s = 0;
  double lr = 0;  // the calibration spec's rule_lr at this global batch (NaN: unknown)
  // A calibration run reached the target in this very cell: its time to target is measured, not
  // held out (a timing run of one epoch that did not reach it measured the step time only).
  bool calibrated = false;
  std::vector<std::string> flags;  // where the models extrapolate
  // A calibration run at this global batch collapsed or diverged: flagged, never recommended.
  bool may_not_train = false;
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

// The seed question at global batch B, from the steps model: do 2 replicas at twice the global
// batch reach the target of 1 replica at B in half the steps? The model's answer is S(2B) / S(B)
// against 1/2, at the lrs the calibration's rule gives (lr, doubled_lr).
struct DoubledBatch {
  int64_t batch = 0;
  double steps = 0, doubled_steps = 0;  // S(B), S(2B) by the estimate Plan::steps_source names
  double lr = 0, doubled_lr = 0;        // rule_lr at B and at 2B (NaN: unknown)
  bool extrapolated = false;            // B or 2B outside the batches run to the target
  double ratio() const { return doubled_steps / steps; }
};

// What the interval of every cell is built from. In log space, around the time at each end of the
// steps models' range (the cell's estimate, the fit's and the noise scale's: a disagreement is a
// range, not noise), kIntervalZ x sqrt(seed_cv^2 + step_log_rms^2) either way.
struct PredictionSpread {
  // Seed-to-seed coefficient of variation of steps to the target, pooled over the calibrated
  // batches run at 2+ seeds; NaN with one seed a batch (the interval then has no seed part, and
  // the plan says so).
  double seed_cv = 0;
  int seed_batches = 0;     // the batches it pools
  double step_log_rms = 0;  // the step-time model's rms log error over the timed runs (StepTimeModel::log_rms)
};
// The two-sided 80% quantile of a normal: intervals are 80% intervals.
constexpr double kIntervalZ = 1.2815515655446004;

struct Plan {
  Target target;
  std::vector<CellPlan> cells;
  StepTimeModel step_time;
  std::vector<FitRow> step_fit;  // per timed calibration run
  // The all-reduce probe (probe.json) whose bandwidth and latency step_time uses (comm_measured),
  // and beside it the model with them fitted from the step times instead.
  std::optional<AllReduceProbe> probe;
  std::optional<StepTimeModel> step_time_fitted;
  std::optional<report::BatchTradeoffFit> steps_fit;
  std::string steps_fit_refusal;  // why there is no fit, when there is none
  // "McCandlish fit", "noise scale", or with both "McCandlish fit within the calibrated batches,
  // noise scale beyond them" (plan.cpp, steps_estimate).
  std::string steps_source;
  double steps_gap = 0;                        // largest |fit - noise| / fit over the cells (NaN without both)
  int noise_reference_runs = 0;                // runs whose B_simple trajectory gives the noise-scale estimate
  std::map<int64_t, double> calibrated_steps;  // global batch -> mean steps to the target over seeds
  std::map<int64_t, double> calibrated_lrs;    // global batch -> their runs' rule_lr (NaN: unknown)
  std::string lr_rule;                         // the calibration spec's schedule.scale_rule ("" unknown)
  std::vector<DoubledBatch> doubled;           // the seed question at each grid batch
  PredictionSpread spread;
  // The baselines' reference: the calibration cell with the fewest replicas, then the smallest
  // batch, that reached the target; its mean time and epochs to the target.
  GridCell reference;
  double reference_ttt_s = 0, reference_epochs = 0;
  double samples_per_epoch = 0;
  std::optional<size_t> fastest, cheapest;  // indices into cells
  std::vector<std::string> notes;           // runs left out and why, model caveats
  std::vector<std::string> calibration_runs;
  // The calibration's spec as a held-out run must share it (planned_spec of a run that reached the
  // target: a timing run's epochs and train_limit are the calibration's own); null when unknown.
  nlohmann::json spec;
  std::string created;  // when make_plan ran (rundir::utc_now)
  std::string hash;     // seal_of(to_json())

  nlohmann::json to_json() const;
};

// Fits both models on `calibration` and predicts every cell; with `probe`, T_comm's bandwidth and
// latency are the probe's (the fitted ones are kept beside them). Throws ddplab::Error naming what
// is missing when the calibration cannot support the grid: no replica count timed at 2
// per-replica batches, or no steps estimate (neither 2 global batches that reached the target with
// samples growing with the batch, nor a run at 2+ replicas with the noise scale that reached it).
Plan make_plan(const Calibration& calibration, const std::vector<GridCell>& grid,
               const std::optional<AllReduceProbe>& probe = std::nullopt);

// The relative disagreement of the two steps models (|fit - noise| / the smaller) above which a
// cell that could be the fastest is worth a calibration run at its batch (batch_to_calibrate).
constexpr double kModelsDisagree = 0.15;

// Where the calibration should go next: among the cells that could be the fastest (the fastest,
// and every cell whose interval reaches below its upper end) at a global batch that no calibration
// run reached the target at, the batch where the steps models disagree most, if by more than
// kModelsDisagree; nullopt when there is none (or no recommendation). `disagreement` gets it.
std::optional<int64_t> batch_to_calibrate(const Plan& plan, double* disagreement = nullptr);

// The predictions (replicas, batch, step time, steps, time to target and the baselines of every
// cell, numbers to 6 significant digits): plan.json's summary of what it predicts.
nlohmann::json predictions_json(const std::vector<CellPlan>& cells);
// plan.json's seal: SHA-256, in hex, of `plan_document`'s compact JSON without its "hash" key:
// every cell (predictions, calibrated flags, lrs, flags), the target, the models, "created" and
// "spec". A plan.json read back gives the seal it was written with (nlohmann prints a double as
// the shortest text that reads back to it).
std::string seal_of(nlohmann::json plan_document);
// What the plans of ddplab before 2026-12-07 hashed: FNV-1a (64 bit) of predictions_json's compact
// text, in hex (16 digits); `--check` still verifies such plans, saying that it covers less.
std::string legacy_predictions_hash(const nlohmann::json& predictions);
// The part of a run's spec.json (resolved) that a run held out for a plan must share with the
// plan's calibration: rundir::effective_spec (what a resume compares) without the grid's axes
// (replicas.count, batch) and the seeds (seed, repeats, sweep, sweep_zip). Null for null.
nlohmann::json planned_spec(const nlohmann::json& spec);

std::string render_plan_markdown(const Plan& plan);
// A self-contained page (the report's CSS and inline SVG, nothing fetched): the recommendation,
// every cell's predictions and flags, the seed question, the models, and plan_chart.
std::string render_plan_html(const Plan& plan);
// Predicted time to target against global batch (log2 x, log y), one line per replica count, the
// recommended cells marked and labelled ("fastest", "cheapest").
report::LineChart plan_chart(const Plan& plan);

// Writes plan.json, plan.md and plan.html into `out_dir` (created); returns the files.
std::vector<std::filesystem::path> write_plan(const Plan& plan, const std::filesystem::path& out_dir);

}  // namespace ddplab::plan
