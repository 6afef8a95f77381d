// What the planner reads from run directories (spec.json, manifest.json, epochs.jsonl, steps.jsonl):
// per run its step time, its steps and time to the target, its evaluation and start-up overheads and
// its noise-scale trajectory. Both the calibration (`ddplab plan --calibration DIR...`) and the
// held-out runs of `ddplab plan --check` are measured here, by the same rules. Runs are read by
// rundir::read_run, and steps to a target are measured as the report measures them:
// rundir::RunData::steps_to_loss (a running mean of the training loss over
// rundir::kLossWindowSamples samples, from step records) for a loss target,
// rundir::RunData::reaching for an accuracy target (the first evaluation point at it where
// the run has log.eval_every_steps' points on the selection set, else the first epoch's end).
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/plan/fit.h"
#include "ddplab/rundir/run_data.h"

namespace ddplab::plan {

// The target time to target is measured to: a training loss (read from step records, not
// quantised to epochs; the runs need log.every_steps) or an accuracy (the report's selection
// accuracy, validation with a split, else test: at evaluation points where the runs have them,
// log.eval_every_steps, else at epoch ends, quantised to epochs).
struct Target {
  std::optional<double> loss;
  std::optional<double> acc;
  // "training loss 0.45 (running mean over 8192 samples, step records)" or "accuracy 88.0% (at
  // evaluation points where runs have them, else epoch ends)".
  std::string describe() const;
  nlohmann::json to_json() const;                    // {"loss": x} or {"acc": x}
  static Target from_json(const nlohmann::json& j);  // as to_json writes it
};

// One run as the planner measures it. NaN for what its records do not tell.
struct MeasuredRun {
  std::filesystem::path dir;
  std::string run_id;
  int replicas = 1;
  int64_t global_batch = 0;
  int64_t seed = 0;
  StepTiming timing;                       // medians over its epochs of epoch_s / steps and of comm_wait_s / steps
  double wire_bytes_per_step = 0;          // comm_bytes / steps (ring bytes rank 0 sent per step)
  double bucket_mb = 25;                   // spec replicas.bucket_mb
  double steps_per_epoch = 0;              // the last record's step / its epoch
  double eval_s = 0;                       // per epoch: the wall time between epochs not spent training
  double startup_s = 0;                    // manifest train_start - start (NaN when restarted or not known)
  double images_per_s = 0;                 // mean over epochs
  int epochs = 0;                          // records
  std::optional<double> steps_to_target;   // optimizer steps
  std::optional<double> time_to_target_s;  // wall seconds since training started, evaluation included, plus startup_s
  std::vector<ProgressSpan> progress;      // to the target: steps per epoch with its B_simple (runs that logged it)
  // Why the run cannot give steps to the target ("collapsed", "diverged", "not finished (failed)",
  // "did not reach training loss 0.45 in 3 epochs"); empty when it can.
  std::string left_out;
  // How it ended (rundir::RunData::health): kCollapsed or kDiverged is a finding about its cell.
  std::optional<rundir::RunHealth> health;
  // Whether its step time counts: finished with records and not diverged (a collapsed run trains
  // as fast as any).
  bool timed = false;
  // How loaded rank 0's host was while it trained: means over its epochs of host_cpu_wait_pct and
  // host_steal_pct (rundir::EpochRecord), in percent; NaN where the records do not hold them.
  double host_cpu_wait_pct = std::numeric_limits<double>::quiet_NaN();
  double host_steal_pct = std::numeric_limits<double>::quiet_NaN();
  // The lr its spec gives at its global batch (rule_lr); NaN when the spec does not resolve.
  double lr = std::numeric_limits<double>::quiet_NaN();
};

// The lr a spec document (a run's spec.json) gives at `global_batch`: optimizer.lr x
// schedule.scale_rule's factor (config/lr_rule.h), before warmup and decay; NaN when the document
// does not resolve.
double rule_lr(const nlohmann::json& spec, double global_batch);

// Measures `run` (read by rundir::read_run) against `target`.
MeasuredRun measure_run(const rundir::RunData& run, const Target& target);

struct Calibration {
  std::vector<MeasuredRun> runs;
  std::vector<std::string> notes;  // "<run>: left out of the steps fit: collapsed", and report's warnings
  Target target;
  // spec.json of the first run that reached the target, else of the first run (schedule, dataset;
  // a timing run's epochs and train_limit are the calibration's own); null when none.
  nlohmann::json spec;
};

// Reads and measures every run below `dirs` (rundir::find_run_dirs). `target` unset: the runs'
// spec report.target_loss, else report.target_acc; an Error when neither is known.
Calibration read_calibration(const std::vector<std::filesystem::path>& dirs, Target target);

}  // namespace ddplab::plan
