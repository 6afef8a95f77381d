// A run directory read once (read_run in run_reader.h) and what its own records say about it: how
// it ended, its final and best accuracies, where it reached a target, its steps to a training loss.
// The report, the planner, the TensorBoard export (also live, during a run) take runs as RunData;
// what sets runs beside each other (groups, statistics, comparisons, decisions) is the report's
// (report/report.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/rundir/run_log.h"

namespace ddplab::rundir {

// An optional field of a record as a number: NaN when the record does not have it.
inline double or_nan(const std::optional<double>& v) { return v.value_or(std::numeric_limits<double>::quiet_NaN()); }

// Which accuracy chooses (best epoch, time to target, the report's chosen target and
// recommendation): validation accuracy when every run of a report has it in every record
// (report::ReportData::on_validation), else test accuracy. `on_validation` picks the field; NaN for
// a record without val_acc.
double selection_acc(const EpochRecord& e, bool on_validation);

// The window of RunData::steps_to_loss, in training samples.
constexpr double kLossWindowSamples = 8192;

// How a run ended, for statistics: only kOk runs' metrics are averaged and compared.
//   kDiverged   its manifest says diverged, or it finished with a non-finite final training loss, or
//               near chance after a loss explosion (health.h);
//   kCollapsed  its manifest says collapsed, or it finished near chance (ended_near_chance: final
//               training and test accuracies both below 1.5 / classes) without a loss explosion;
//   kOk         every other finished run with records.
// (Runs not finished, with no records, or still running are none of these.)
enum class RunHealth { kOk, kCollapsed, kDiverged };

// Where a run reached an accuracy target (RunData::reaching).
struct TargetPoint {
  double epoch = 0;    // epochs done there: fractional at an evaluation point
  int64_t step = 0;    // optimizer steps
  double samples = 0;  // training samples: step x global batch
  double wall_s = 0;   // since training started, evaluation included
  int replicas = 1;    // device-seconds = wall_s x replicas
  bool point = false;  // at an evaluation point (a step record's eval_acc), not an epoch's end
};

struct RunData {
  std::filesystem::path dir;
  std::string run_id;      // manifest run_id, else the directory name
  std::string experiment;  // spec name, else manifest experiment
  // The manifest's status; nullopt for one ddplab does not write (or none), which is still shown.
  std::optional<RunStatus> status;
  std::string status_name;          // the manifest's spelling of the status, "unknown" when it has none
  std::string message;              // manifest message (why a run failed), may be empty
  nlohmann::json manifest;          // manifest.json as read_manifest reads it (an object)
  nlohmann::json spec;              // spec.json (null when missing or unreadable)
  std::vector<EpochRecord> epochs;  // epochs.jsonl by epoch (read_epoch_records)
  std::vector<StepRecord> steps;    // steps.jsonl (log.every_steps) by step (read_step_records); empty without
  // The manifest's "step_eval" (log.eval_every_steps: every_steps, the set, samples); null without.
  nlohmann::json step_eval;

  // Trained to its end: done, or collapsed (near chance, health.h).
  bool finished() const { return status == RunStatus::kDone || status == RunStatus::kCollapsed; }
  // The classes of the dataset its spec.json names (config::known_classes); 10 where ddplab does
  // not know them (idx, no spec).
  int classes() const;
  // How it ended (RunHealth above), near chance judged by classes(); nullopt for a run that is
  // neither finished with records nor diverged.
  std::optional<RunHealth> health() const;
  // A kOk run whose final test accuracy is under the floor of ended_poor (health.h): it learnt, but
  // little.
  bool poor() const;
  bool running() const { return status == RunStatus::kRunning; }
  // "in progress" for running, else status_name.
  std::string status_text() const;
  int replicas() const;               // from the last record, else spec replicas.count, else 1
  int64_t per_replica_batch() const;  // global_batch / replicas of the last record (0 if unknown)
  double final_test_acc() const;      // NaN without records
  double best_test_acc() const;       // best over epochs: optimistic, chosen on the test set
  // The epoch of the highest selection_acc (the first of equals), or nullptr when none is finite.
  const EpochRecord* best_epoch(bool on_validation) const;
  // The mean test accuracy of the last k records (all of them when fewer), in points; NaN without.
  double final_test_acc_points(int k) const;
  double final_train_loss() const;
  double final_test_loss() const;
  double mean_images_per_s() const;  // mean over epochs
  // Means over the epochs that recorded them, in percent; NaN when none did.
  double mean_host_cpu_wait_pct() const;
  double mean_host_steal_pct() const;
  // The first epoch whose selection_acc(on_validation) >= target, or nullptr.
  const EpochRecord* first_reaching(double target, bool on_validation = false) const;
  // Whether its step records hold evaluation points (log.eval_every_steps) on the set that
  // selection_acc(on_validation) reads: the manifest's step_eval names the validation split when
  // `on_validation`, else the test set.
  bool has_eval_points(bool on_validation) const;
  // Where it reached accuracy `target`: with has_eval_points, at the first evaluation point whose
  // eval_acc >= target (not quantised to epochs; the points' images are a fixed subset, so the
  // accuracy is theirs), else at first_reaching's epoch end. nullopt when it never did.
  std::optional<TargetPoint> reaching(double target, bool on_validation) const;
  // Steps to a training loss, read from the curve and not from one record: the first step record
  // from which on the training loss, averaged over a window of kLossWindowSamples samples centred
  // on each record (records weighted by their samples inside it), stays at or below `target_loss`
  // to the last record. nullptr if it never does. One record of a small batch averages few samples
  // (5 steps of batch 32: 160), so its loss dips below a target by chance long before the curve
  // gets there; a window of equal samples for every batch gives each the same noise.
  const StepRecord* steps_to_loss(double target_loss) const;
};

}  // namespace ddplab::rundir
