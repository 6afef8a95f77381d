// The run directory and its files:
//
//   <output>/<name>/<run-id>/   run-id "seed=<seed>"; a sweep's runs name the swept values too,
//                               "replicas.count=2,schedule.scale_rule=linear,seed=3" (config/sweep.h)
//     spec.json, manifest.json, epochs.jsonl, ...: the file names are in layout.h
//
// Every record is appended with one write(2) on an O_APPEND descriptor followed by fsync, so
// a crash never leaves a torn line; manifest.json is replaced atomically (temp file + rename).
#pragma once
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"
#include "ddplab/rundir/layout.h"

namespace ddplab::rundir {

// manifest.json's "status": running while a run is in progress (or was killed), then what ended it.
// collapsed: it trained to its end but ended near chance (rundir/health.h).
enum class RunStatus { kRunning, kDone, kFailed, kInterrupted, kDiverged, kCollapsed };
const char* name(RunStatus status);  // "running", "done", "failed", "interrupted", "diverged", "collapsed"
// The status spelled `text`; nullopt for anything else (a manifest ddplab did not write).
std::optional<RunStatus> parse_status(const std::string& text);
// done, diverged and collapsed: a sweep skips such a run, and it is not resumed.
inline bool is_finished(RunStatus status) {
  return status == RunStatus::kDone || status == RunStatus::kDiverged || status == RunStatus::kCollapsed;
}

struct EpochRecord {
  int epoch = 0;                         // 1-based
  int64_t step = 0;                      // global optimizer steps so far
  double lr = 0;                         // at the last step of the epoch
  double train_loss = 0, train_acc = 0;  // sample-weighted over all replicas
  double test_loss = 0, test_acc = 0;
  // dataset.validation: the held-out part of the training set (data/dataset.h, validation_split),
  // evaluated like the test set. Null without a split; then epochs.jsonl has no such keys, so a run
  // without one writes the records it wrote before the fields existed.
  std::optional<double> val_loss, val_acc;
  double epoch_s = 0;       // training time of this epoch (evaluation excluded)
  double wall_s = 0;        // since the start of training, evaluation included
  double images_per_s = 0;  // global training images / epoch_s
  double comm_wait_s = 0;   // rank 0's time blocked on gradient all-reduce this epoch
  double grad_norm = 0;     // mean over steps of |averaged gradient|_2
  // Gradient noise scale (McCandlish et al. 2018; train/noise_scale.h), from the all-reduced steps
  // of runs with 2 or more replicas (processes or simulated); null (JSON) / empty (CSV) otherwise.
  // Values at the epoch's last step of the bias-corrected EMAs (decay 0.99 per step) of the
  // unbiased per-step estimates of tr(Sigma) and |G|^2, and their ratio B_simple (null while the
  // |G|^2 EMA is not positive).
  std::optional<double> grad_noise_scale;  // B_simple = gns_trace_ema / gns_grad_sq_ema, in samples
  std::optional<double> gns_trace_ema;     // EMA of the estimate of tr(Sigma), per-sample gradient covariance
  std::optional<double> gns_grad_sq_ema;   // EMA of the estimate of |G|^2, the true gradient's squared norm
  // Bytes this rank sent this epoch in the collectives that carry gradients or parameters
  // (gradient all-reduces, local SGD averaging, EASGD's elastic all-reduce), counted as a ring
  // all-reduce sends them: 2 (N - 1) / N x payload bytes per all-reduce. 0 with one replica.
  // Simulated replicas log what each of the N processes would send. Null (JSON) / empty (CSV) only
  // in a record read from a file older than the field: the trainer always counts.
  std::optional<int64_t> comm_bytes = 0;
  // local_sgd and easgd only (null otherwise): at the epoch's end, sqrt(mean_r |x_r - x_mean|^2) /
  // |x_mean| over the replicas' parameter vectors x_r: how far the replicas have drifted apart.
  std::optional<double> replica_drift;
  int replicas = 1;
  int64_t global_batch = 0;
  // How crowded rank 0's host was while this epoch trained (runtime/host_load.h), in percent:
  // the share of wall time some task waited for a CPU (PSI), and the CPU time stolen by the
  // hypervisor. Null where the kernel does not offer the counter. Like epoch_s, they describe the
  // machine, not the training: the report flags a run whose values differ from its group's others.
  std::optional<double> host_cpu_wait_pct;
  std::optional<double> host_steal_pct;
  // debug.audits "warn" only: the messages of the audits that failed this epoch (each names the
  // audit, the epoch and what it found: "update audit failed in epoch 2: parameter 'fc1.bias' did
  // not change ..."), as rank 0 found them. Written only when not empty; not a CSV column.
  std::vector<std::string> audit_warnings;

  // The record as epochs.jsonl holds it (one object; null for an unset optional and for a
  // non-finite number, which JSON cannot hold; audit_warnings only when there are some).
  nlohmann::json to_json() const;
  // The record `j` holds, as to_json writes it: integers epoch, step, comm_bytes, replicas and
  // global_batch; numbers (or null, read as NaN) for the other plain fields; a number or null
  // for the optional ones. The fields added after the first records were written may be absent
  // (older run directories): grad_noise_scale, gns_trace_ema, gns_grad_sq_ema, replica_drift,
  // host_cpu_wait_pct, host_steal_pct and comm_bytes then read as null; audit_warnings (an array of strings) may
  // be absent too (none); val_loss and val_acc are absent without a validation split. Other keys are ignored. Throws
  // ddplab::Error naming the field and what was expected ("lr: expected a number, got \"fast\""); the caller adds the
  // file and line.
  static EpochRecord from_json(const nlohmann::json& j);
  static std::vector<std::string> csv_columns();
  // The fields that describe the machine rather than the training, known by their names: those
  // ending in "_s" (seconds, and images_per_s) or beginning with "host_" (epoch_s, wall_s,
  // images_per_s, comm_wait_s, host_cpu_wait_pct and host_steal_pct so far; a new field that
  // times or loads the machine is named so). Two runs of one spec on one build agree on every
  // other field, bit for bit; bench/same_records.py compares records by the same names.
  static const std::vector<std::string>& machine_fields();
  std::string csv_row() const;

 private:
  nlohmann::json plain_json() const;  // to_json without audit_warnings
};

// One interval of log.every_steps steps (steps.jsonl): intervals restart at each epoch, so the
// epoch's last step closes one too (shorter when every_steps does not divide the epoch), and so
// does a clean stop. Over a run, resumed or not, every optimizer step lies in exactly one record.
struct StepRecord {
  int64_t step = 0;                      // global optimizer steps taken at the interval's end (1-based count)
  double epoch = 0;                      // epochs done at its end, fractional: 1.5 = half of the second epoch
  int64_t interval_steps = 0;            // steps the record covers: step - the previous record's step
  double lr = 0;                         // at the interval's last step
  double train_loss = 0, train_acc = 0;  // over the interval's samples, summed over all replicas
  int64_t samples = 0;                   // training samples seen so far over all replicas: step x global batch
  double elapsed_s = 0;                  // since the start of training (evaluation included)
  // log.eval_every_steps: an evaluation point at this record's step, with the weights an epoch's
  // end evaluates, on the fixed images the manifest's "step_eval" names (train/evaluator.h); its
  // time is in elapsed_s. Absent (JSON) without one, so records without points read as before.
  std::optional<double> eval_loss, eval_acc;

  // One JSON object (null for a non-finite number; eval_loss and eval_acc only when set).
  nlohmann::json to_json() const;
  // The record `j` holds, as to_json writes it: integers step, interval_steps and samples,
  // numbers (or null, read as NaN) for the others, eval_loss and eval_acc a number, null or absent.
  // Throws ddplab::Error naming the field and what was expected; the caller adds the file and line.
  static StepRecord from_json(const nlohmann::json& j);
};

// spec.run_id when set (a sweep's run), else "seed=<seed>".
std::string run_id(const config::ExperimentSpec& spec);
// <output>/<name>: the experiment's directory, holding its runs, its sweep/ files and its report.
std::filesystem::path experiment_dir(const config::ExperimentSpec& spec);
// <output>/<name>/<run_id(spec)>.
std::filesystem::path run_dir(const config::ExperimentSpec& spec);

// A run's identity: the parts of its resolved spec (spec.json) that shape its records, the fields
// whose schema role is in_identity (trains and seed; config/field_roles.h has the table). So left
// out: where it is written and what it is called, how it is logged, checkpointed, reported and
// launched (the roles logs, directory, report, launcher), and debug.fault's drills (crash, throw,
// stop: its launcher_values); debug.fault's bugs (skip_broadcast, ...) stay, as a sorted array.
// Two specs with equal effective specs make the same run; a sweep reuses a finished run, and a run
// resumes, only when they are equal.
nlohmann::json effective_spec(const nlohmann::json& resolved);
// What changed from the run `dir` holds (its spec.json) to `spec`, one line per key of the
// effective specs as config::resolved_differences writes them ("/epochs: 1 -> 3"); empty when they
// are equal or `dir` holds no spec.json. A field that spec.json lacks (written by a ddplab from
// before the field existed) counts as what that ddplab did (config::upgraded_spec): its default,
// or for dataset.order "torch_sampler". Then, when the manifest records the run's input files
// (rundir/inputs.h), one line per file whose content changed since: "my_net.pt: content changed,
// sha256 <recorded> -> <now>". Throws ddplab::Error naming spec.json if it is not JSON.
std::vector<std::string> spec_changes(const std::filesystem::path& dir, const config::ExperimentSpec& spec);

// Appends `line` + '\n' whole (one write, then fsync). Throws ddplab::Error naming the file.
void append_line(const std::filesystem::path& file, const std::string& line);
// Appends `bytes` as append_line does (the file is created if missing; a failed write is cut off).
void append_bytes(const std::filesystem::path& file, const std::string& bytes);
// Writes `text` to a temp file beside `file`, fsyncs and renames it over `file`.
void write_file_atomic(const std::filesystem::path& file, const std::string& text);

// The manifest's "checkpoint" entry: where the run's checkpoint.pt stands. The trainer writes it
// with the file; resuming and the stop message read it.
struct CheckpointMark {
  int64_t epochs_done = 0;    // completed epochs
  int64_t step_in_epoch = 0;  // steps done of the next epoch
  int64_t global_step = 0;
  int64_t records = 0;  // lines of epochs.jsonl the checkpoint goes with
  std::string time;     // when it was written (utc_now())

  nlohmann::json to_json() const;
  // The mark in `manifest` (read_manifest); nullopt when it has none. A missing field reads 0.
  static std::optional<CheckpointMark> of(const nlohmann::json& manifest);
};

// Parses a JSON file. Throws ddplab::Error naming the file (cannot read, or where the JSON breaks).
nlohmann::json read_json(const std::filesystem::path& file);
// <dir>/manifest.json: a JSON object whose "status" (if any) is a string and "checkpoint" (if any)
// an object. Throws ddplab::Error naming the file otherwise.
nlohmann::json read_manifest(const std::filesystem::path& dir);
// The status in <dir>/manifest.json; nullopt when there is no manifest (or it names no known
// status). Throws ddplab::Error on a malformed manifest, as read_manifest.
std::optional<RunStatus> read_status(const std::filesystem::path& dir);

class RunLog {
 public:
  // Creates the directory, writes spec.json and a manifest with status "running".
  // Refuses to reuse a directory that already holds epochs.jsonl unless `overwrite`, which empties
  // it first (all but the launcher's slurm-* files, layout.h).
  static RunLog create(const config::ExperimentSpec& spec, bool overwrite);
  // Opens an existing run directory (made by the launcher) without touching it.
  static RunLog open(const std::filesystem::path& dir);
  // The run directory of `spec` if it holds_resumable_run(), ready to continue: records after the
  // checkpoint are dropped (epoch records beyond its "records", step records beyond its
  // "global_step", and a torn last line),
  // the manifest gets status "running" and a "restarts" entry. Nothing if there is no such run.
  // Throws ddplab::Error listing the changed keys if the unfinished run was made by a spec whose
  // effective_spec differs.
  static std::optional<RunLog> resume(const config::ExperimentSpec& spec, const std::string& reason);

  const std::filesystem::path& dir() const { return dir_; }
  void append(const EpochRecord& record) const;
  // Appends the records to steps.jsonl in one write (nothing when empty).
  void append_steps(const std::vector<StepRecord>& records) const;
  // Merges `fields` into manifest.json (read, update, atomic replace).
  void update_manifest(const nlohmann::json& fields) const;
  // Sets status and end time (and `message` when not empty).
  void finish(RunStatus status, const std::string& message = "") const;

 private:
  explicit RunLog(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
};

// Whether `dir` holds an unfinished run (status running, failed or interrupted) with a
// checkpoint, which RunLog::resume continues. Throws ddplab::Error on a malformed manifest.
bool holds_resumable_run(const std::filesystem::path& dir);

// The last epoch record of <dir>/epochs.jsonl; nothing when there is none or it does not read.
std::optional<EpochRecord> last_epoch_record(const std::filesystem::path& dir);

// ISO 8601 UTC time to the millisecond, "2026-12-02T08:46:03.125Z": every time ddplab writes
// (the manifest's "start", "end", "train_start", restarts and checkpoint marks; plans; logs).
std::string utc_now();
std::string utc_text(std::chrono::system_clock::time_point time);
// Seconds since the Unix epoch of the time at `key` of `manifest`, with or without the
// milliseconds (manifests written before 2026-12-06 have none); nullopt when there is no such
// key or its value is not such a time.
std::optional<double> manifest_time(const nlohmann::json& manifest, const char* key);

}  // namespace ddplab::rundir
