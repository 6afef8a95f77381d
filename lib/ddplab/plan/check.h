// `ddplab plan --check plan.json RUN_DIRS...`: a plan scored against runs done after it. The runs
// are measured by calibration.h's rules at the plan's target and grouped into the plan's cells
// (replicas x global batch; runs of other cells are listed and not scored). Per cell, the relative
// errors (predicted / measured - 1) of step time, of steps to target and of time to target, apart,
// so that a wrong half (systems or statistics) shows; over the held-out cells (those the plan did
// not calibrate), Spearman's rank correlation of predicted and measured time, the regret and the
// same for the plan's two baselines. A cell whose seed-to-seed coefficient of variation of time to
// target exceeds kJudgeableCv "cannot be judged": it is shown, never counted for or against.
// Only runs made after the plan count: a run that started before the plan was sealed (or whose
// start is unknown), or whose spec differs from the plan's other than in the grid's axes and seeds
// (planned_spec), is refused: named with its reason, never scored.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddplab::plan {

constexpr double kJudgeableCv = 0.15;     // seed-to-seed CV of time to target above which a cell cannot be judged
constexpr double kErrorTolerance = 0.15;  // |time-to-target error| counted as "within"

struct CellCheck {
  int replicas = 1;
  int64_t global_batch = 0;
  bool calibrated = false;  // the plan measured this cell: not held out
  int runs = 0, reached = 0;
  double step_s = 0, steps = 0, ttt_s = 0, ttt_cv = 0;  // measured means over the runs that reached the target
  double predicted_step_s = 0, predicted_steps = 0, predicted_ttt_s = 0;
  double linear_ttt_s = 0, throughput_ttt_s = 0;  // the baselines' predictions
  double fit_ttt_s = 0, noise_ttt_s = 0;          // each steps rule alone (NaN: the plan had none)
  double ttt_low_s = 0, ttt_high_s = 0;           // the plan's 80% interval (NaN: a plan without intervals)
  double step_error = 0, steps_error = 0, ttt_error = 0, linear_error = 0, throughput_error = 0;  // NaN: no measurement
  double fit_error = 0, noise_error = 0;
  // Held out and reached by every run: scored without the CV filter.
  bool scorable = false;
  bool judged = false;   // scorable with CV <= kJudgeableCv
  bool covered = false;  // the measured mean time to target lies in [ttt_low_s, ttt_high_s]
};

// One predictor over the judged cells: mean |TTT error|, Spearman rho of predicted against
// measured time, regret (measured time of its predicted-best cell / the measured best).
struct PredictorScore {
  double mean_abs_error = 0, spearman = 0, regret = 0;
  int within_tolerance = 0;  // cells with |error| <= kErrorTolerance
  int cells = 0;             // the cells scored (those with a prediction)
};

// The plan's interval over a set of cells: how many held their measured mean.
struct Coverage {
  int covered = 0, cells = 0;
};

struct CheckResult {
  std::string plan_hash;             // as plan.json states it
  bool hash_matches = false;         // recomputed (seal_of; legacy_predictions_hash for an older plan)
  bool sealed = false;               // the hash covers all of plan.json, not its predictions only (older plans)
  std::string plan_created;          // plan.json's "created"
  std::vector<std::string> refused;  // "<run dir>: <why it is not held out>", not scored
  std::string target_text;
  std::vector<CellCheck> cells;
  int judged = 0, cannot_judge = 0;
  // Over the judged cells: the plan, each steps rule alone, and the two baselines; then the plan
  // without the CV filter (over the scorable cells).
  PredictorScore planner, fit_only, noise_only, linear, throughput, planner_unfiltered;
  Coverage coverage, coverage_unfiltered;  // of the 80% intervals, judged and scorable cells
  std::vector<std::string> notes;          // runs of no cell, runs left out and why
};

// Throws ddplab::Error when `plan_file` is not a plan.json ddplab wrote.
CheckResult check_plan(const std::filesystem::path& plan_file, const std::vector<std::filesystem::path>& run_dirs);

std::string render_check_markdown(const CheckResult& result);
// Writes check.json and check.md into `out_dir`; returns the files.
std::vector<std::filesystem::path> write_check(const CheckResult& result, const std::filesystem::path& out_dir);

}  // namespace ddplab::plan
