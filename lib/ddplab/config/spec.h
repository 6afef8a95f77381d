// The experiment spec: JSON in, a validated and fully resolved ExperimentSpec out.
//
// lib/ddplab/config/schema.json is the source of truth (compiled into the binary, printed by
// `ddplab schema`); its "default" values are filled in for every missing field, so the
// resolved JSON (`ExperimentSpec::resolved`, written as spec.json) names every setting.
// Validation uses valijson; every error is a ddplab::Error whose message starts with the JSON
// pointer of the culprit and says what was expected, e.g.
//   "/optimizer/lr: must be > 0, got -1"
//   "/optimiser: unknown key; did you mean \"optimizer\"?"
//   "exp.json:3:14: malformed JSON: ..."
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/config/settings.h"

namespace ddplab::config {

struct DatasetSpec {
  DatasetName name = DatasetName::kFashionMnist;
  std::string root;                                // resolved: never empty after resolve()
  int64_t train_limit = 0;                         // 0: all
  int64_t test_limit = 0;                          // 0: all
  Augment augment = Augment::kNone;                // data/transform.h
  DataOrder order = DataOrder::kIndependent;       // data/loader.h epoch_permutation
  DataShard shard = DataShard::kContiguous;        // data/loader.h TrainLoader
  DataPlacement placement = DataPlacement::kAuto;  // data/device_data.h
  double validation = 0;                           // data/validation.h: a fraction below 1, else a count; 0: none
};

struct EarlyStopSpec {
  StopMetric metric = StopMetric::kValLoss;  // train/early_stop.h
  int64_t patience = 0;                      // 0: never stop early
  double min_delta = 0;
};

// model.layers entry (docs/spec.md#modellayers): a layer of a model described in the spec. The
// fields a type does not take are 0; resolve() fills each type's defaults.
struct LayerSpec {
  LayerType type = LayerType::kRelu;
  int64_t channels = 0;  // conv, residual: output channels
  int64_t kernel = 0;    // conv, max_pool, avg_pool
  int64_t stride = 0;    // conv, residual (default 1); max_pool, avg_pool (default kernel)
  int64_t padding = 0;   // conv
  int64_t features = 0;  // linear: output features
  double p = 0;          // dropout (default 0.5)
};

struct ModelSpec {
  std::string name = "mnist_cnn";  // a name in the model registry (models/models.h)
  std::vector<LayerSpec> layers;   // model.name "layers": the layers, in forward order
  std::string torchscript;         // model.name "torchscript": the saved module's path
  double dropout = 0.5;            // mnist_cnn and mlp
  int64_t hidden = 128;            // mlp only
  double ema_decay = 0.0;          // weight EMA for evaluation (train/weight_ema.h); 0: off
  bool sync_bn = false;            // BatchNorm statistics over all replicas (models/batch_norm.h)
};

// optimizer.weight_decay_groups entry: parameters whose name `match` finds (std::regex, ECMAScript,
// regex_search) take `weight_decay`; the first matching entry wins.
struct WeightDecayGroup {
  std::string match;
  double weight_decay = 0.0;
};

struct OptimizerSpec {
  OptimizerName name = OptimizerName::kSgd;
  double lr = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;  // parameters no weight_decay_groups entry matches
  std::vector<WeightDecayGroup> weight_decay_groups;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
};

struct ScheduleSpec {
  ScaleRule scale_rule = ScaleRule::kNone;
  int64_t base_batch = 64;
  double warmup_epochs = 0.0;
  double warmup_start_factor = 0.1;
  Decay decay = Decay::kConstant;
  double step_epochs = 30.0;
  std::vector<double> milestones;
  double gamma = 0.1;
  double min_factor = 0.0;
};

// replicas.sync: how the replicas stay together.
struct SyncSpec {
  SyncMethod method = SyncMethod::kAllreduce;
  int64_t period = 1;       // local_sgd: average every `period` local steps; easgd: tau
  int64_t start_epoch = 0;  // local_sgd: epochs of all-reduce before local steps begin
  double alpha = 0.0;       // easgd: moving rate (<= 1 / replicas.count)
};

// replicas.powersgd: PowerSGD's settings (distributed::PowerSgdOptions, PyTorch's PowerSGDState
// defaults); read under replicas.compression "powersgd" only.
struct PowerSgdSpec {
  int64_t rank = 1;                   // matrix_approximation_rank
  int64_t start_iter = 1000;          // reduced steps all-reduced as they are first
  double min_compression_rate = 2.0;  // compress a matrix when (n + m) r * this < n m
  bool error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  int64_t seed = 0;  // the Q draws' seed (PowerSGDState's random_seed)
};

struct ReplicasSpec {
  int count = 1;
  Device device = Device::kCpu;
  Backend backend = Backend::kGloo;  // schema "auto": nccl on cuda, gloo on cpu
  Reduce reduce = Reduce::kMean;
  double bucket_mb = 25.0;
  WireDtype grad_dtype = WireDtype::kFp32;       // all-reduce wire format
  Compression compression = Compression::kNone;  // powersgd: PowerSGD with `powersgd`'s settings
  PowerSgdSpec powersgd;
  int threads = 0;  // resolved: >= 1 after resolve()
  double timeout_s = 300.0;
  int max_restarts = 0;
  ReplicaMode mode = ReplicaMode::kProcesses;  // simulated: count replicas in one process
  SyncSpec sync;
  // The step captured in a CUDA graph and replayed (train/graphed_step.h); one replica only.
  bool cuda_graph = false;
  // Forward and backward passes before the training clock starts, their results thrown away
  // (train/prewarm.h); 0: none.
  int prewarm_steps = 0;
  // Denormal floats flushed to zero on the host threads (runtime/denormal.h); off as in PyTorch.
  bool flush_denormal = false;
};

// debug: fault injection (docs/spec.md#debug). `faults` holds debug.fault's names, "none" left
// out (the field takes one name or an array of them, so several bugs can run together).
struct DebugSpec {
  std::vector<Fault> faults;             // empty: none
  AuditMode audits = AuditMode::kAbort;  // warn: a failed audit is recorded and training goes on
  int rank = 1;                          // crash/throw/stop: the rank it hits
  int64_t step = 0;                      // crash/throw/stop: the global step it hits

  bool has(Fault fault) const { return std::find(faults.begin(), faults.end(), fault) != faults.end(); }
};

struct CheckpointSpec {
  int every_epochs = 1;  // 0: only at the end and on a clean stop
  bool keep = false;     // keep checkpoint.pt once the run is done (removed by default)
};

struct LogSpec {
  // steps.jsonl: a record every this many steps of an epoch and at its last step (rundir/run_log.h
  // StepRecord); 0: none.
  int64_t every_steps = 0;
  // An evaluation point every this many steps of an epoch and at its last step, recorded in the
  // step record there (eval_loss, eval_acc; train/evaluator.h); 0: none. A multiple of every_steps
  // when both are set; without every_steps, step records close every eval_every_steps steps.
  int64_t eval_every_steps = 0;
  // The points' images: the first eval_samples of the validation split (dataset.validation), else
  // of the test set; 0: the whole set.
  int64_t eval_samples = 1000;
  // The interval at which step records close: every_steps, else eval_every_steps (0: none).
  int64_t step_record_every() const { return every_steps > 0 ? every_steps : eval_every_steps; }
  // Without a terminal, every rank prints a plain progress line every this many seconds; 0: none.
  double progress_s = 10;
  // Rank 0 writes a TensorBoard event file into the run directory as it trains (tensorboard/live.h).
  bool tensorboard = false;
  // Every process traces profile_steps training steps from global step profile_from_step on with
  // LibTorch's profiler (runtime/step_profiler.h); 0: none.
  int64_t profile_steps = 0;
  int64_t profile_from_step = 10;
};

struct ExperimentSpec {
  std::string name;
  DatasetSpec dataset;
  ModelSpec model;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  int64_t per_replica_batch = 64;  // resolved from batch.per_replica or batch.global / count
  int64_t global_batch = 64;       // per_replica_batch * replicas.count
  // batch.accumulate_steps: each replica's batch is processed as this many micro-batches of
  // per_replica_batch / accumulate_steps samples (it divides), gradients accumulated and
  // all-reduced once, at the last (DDP's no_sync()); one optimizer step is still one global batch.
  int64_t accumulate_steps = 1;
  ReplicasSpec replicas;
  int epochs = 1;
  Precision precision = Precision::kFp32;  // bf16: autocast
  int64_t seed = 1;
  std::string output = "runs";
  EarlyStopSpec early_stop;
  DebugSpec debug;
  CheckpointSpec checkpoint;
  LogSpec log;
  std::string run_id;       // the run directory's name; "" means "seed=<seed>" (sweeps set it)
  nlohmann::json resolved;  // the whole spec, defaults filled in, no option the model lacks (spec.json)
};

// The one mapping from the schema's JSON pointers to ExperimentSpec's fields, beside the structs
// so that a field's member and its line are written in one file. Every field that a single schema
// property fills is listed here once; resolve() reads them through it (spec.cpp, to_typed) and
// tests/config/spec_fields_test.cpp checks that each field's default equals the schema's "default"
// and each enum's names equal the schema's "enum".
//
// Not listed, because one property does not fill one field (spec.cpp reads them by hand):
// batch.per_replica / batch.global (one of them; both make per_replica_batch and global_batch),
// optimizer.betas (beta1, beta2), optimizer.weight_decay_groups and model.layers (lists of objects),
// replicas.sync (a name or an object; SyncSpec), debug.fault (a name or a list; DebugSpec::faults).
// The sweep keys, report.* (report/report.h) and slurm.* (config/slurm.h) are not ExperimentSpec's.
//
// Adding a spec field: its property (with "default" and "role", field_roles.h) in schema.json, its
// member (with the same default) above and its line below, and docs/spec.md; the tests then check
// that the first two agree and that it has a role.
// Calls visit(pointer, field) for every listed field of `spec`, in the schema's order. `Spec` is
// ExperimentSpec or const ExperimentSpec.
template <class Spec, class Visit>
void for_each_field(Spec& spec, Visit&& visit) {
  visit("/name", spec.name);
  visit("/dataset/name", spec.dataset.name);
  visit("/dataset/root", spec.dataset.root);
  visit("/dataset/train_limit", spec.dataset.train_limit);
  visit("/dataset/test_limit", spec.dataset.test_limit);
  visit("/dataset/augment", spec.dataset.augment);
  visit("/dataset/order", spec.dataset.order);
  visit("/dataset/shard", spec.dataset.shard);
  visit("/dataset/placement", spec.dataset.placement);
  visit("/dataset/validation", spec.dataset.validation);
  visit("/model/name", spec.model.name);
  visit("/model/torchscript", spec.model.torchscript);
  visit("/model/dropout", spec.model.dropout);
  visit("/model/hidden", spec.model.hidden);
  visit("/model/ema_decay", spec.model.ema_decay);
  visit("/model/sync_bn", spec.model.sync_bn);
  visit("/optimizer/name", spec.optimizer.name);
  visit("/optimizer/lr", spec.optimizer.lr);
  visit("/optimizer/momentum", spec.optimizer.momentum);
  visit("/optimizer/nesterov", spec.optimizer.nesterov);
  visit("/optimizer/weight_decay", spec.optimizer.weight_decay);
  visit("/optimizer/eps", spec.optimizer.eps);
  visit("/schedule/scale_rule", spec.schedule.scale_rule);
  visit("/schedule/base_batch", spec.schedule.base_batch);
  visit("/schedule/warmup_epochs", spec.schedule.warmup_epochs);
  visit("/schedule/warmup_start_factor", spec.schedule.warmup_start_factor);
  visit("/schedule/decay", spec.schedule.decay);
  visit("/schedule/step_epochs", spec.schedule.step_epochs);
  visit("/schedule/milestones", spec.schedule.milestones);
  visit("/schedule/gamma", spec.schedule.gamma);
  visit("/schedule/min_factor", spec.schedule.min_factor);
  visit("/batch/accumulate_steps", spec.accumulate_steps);
  visit("/replicas/count", spec.replicas.count);
  visit("/replicas/device", spec.replicas.device);
  visit("/replicas/backend", spec.replicas.backend);
  visit("/replicas/reduce", spec.replicas.reduce);
  visit("/replicas/grad_dtype", spec.replicas.grad_dtype);
  visit("/replicas/compression", spec.replicas.compression);
  visit("/replicas/powersgd/rank", spec.replicas.powersgd.rank);
  visit("/replicas/powersgd/start_iter", spec.replicas.powersgd.start_iter);
  visit("/replicas/powersgd/min_compression_rate", spec.replicas.powersgd.min_compression_rate);
  visit("/replicas/powersgd/error_feedback", spec.replicas.powersgd.error_feedback);
  visit("/replicas/powersgd/warm_start", spec.replicas.powersgd.warm_start);
  visit("/replicas/powersgd/orthogonalization_epsilon", spec.replicas.powersgd.orthogonalization_epsilon);
  visit("/replicas/powersgd/seed", spec.replicas.powersgd.seed);
  visit("/replicas/bucket_mb", spec.replicas.bucket_mb);
  visit("/replicas/threads", spec.replicas.threads);
  visit("/replicas/timeout_s", spec.replicas.timeout_s);
  visit("/replicas/max_restarts", spec.replicas.max_restarts);
  visit("/replicas/mode", spec.replicas.mode);
  visit("/replicas/cuda_graph", spec.replicas.cuda_graph);
  visit("/replicas/prewarm_steps", spec.replicas.prewarm_steps);
  visit("/replicas/flush_denormal", spec.replicas.flush_denormal);
  visit("/epochs", spec.epochs);
  visit("/precision", spec.precision);
  visit("/seed", spec.seed);
  visit("/output", spec.output);
  visit("/early_stop/metric", spec.early_stop.metric);
  visit("/early_stop/patience", spec.early_stop.patience);
  visit("/early_stop/min_delta", spec.early_stop.min_delta);
  visit("/checkpoint/every_epochs", spec.checkpoint.every_epochs);
  visit("/checkpoint/keep", spec.checkpoint.keep);
  visit("/log/every_steps", spec.log.every_steps);
  visit("/log/eval_every_steps", spec.log.eval_every_steps);
  visit("/log/eval_samples", spec.log.eval_samples);
  visit("/log/progress_s", spec.log.progress_s);
  visit("/log/tensorboard", spec.log.tensorboard);
  visit("/log/profile_steps", spec.log.profile_steps);
  visit("/log/profile_from_step", spec.log.profile_from_step);
  visit("/debug/audits", spec.debug.audits);
  visit("/debug/rank", spec.debug.rank);
  visit("/debug/step", spec.debug.step);
}

// Reads and parses a JSON file. Throws Error naming the file (missing, unreadable) or
// "file:line:col: malformed JSON: ..." on a syntax error.
nlohmann::json load_json_file(const std::string& path);

// Parses JSON text the way load_json_file parses a file's contents; `source` (the file name)
// prefixes every message. Besides syntax errors, a number out of double's range
// ("source: malformed JSON: number overflow parsing '1e999'") and nesting deeper than
// kMaxJsonDepth are Errors: a spec is 4 levels deep at most, and nlohmann's dump, copy and
// comparison recurse once per level, so a deeper document would only overflow the stack.
constexpr int kMaxJsonDepth = 64;
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// A key as one token of a JSON pointer (RFC 6901: '~' -> "~0", '/' -> "~1"), so that a key with
// '/' or '~' still yields a valid pointer in a message.
std::string escape_token(const std::string& key);

// nlohmann's exception text for a person: "[json.exception.out_of_range.406] number overflow ..."
// without the bracketed id.
std::string json_message(const nlohmann::json::exception& e);

// Applies one command-line override "a.b.c=value" to `doc`. The value is parsed as JSON
// (number, bool, null, list, object; an object replaces the whole section), else taken as a
// string. Missing intermediate objects are created. Throws Error on a malformed assignment
// (no '=', empty key, a key path through a non-object, text that is not UTF-8, a number out of
// double's range, a value nested deeper than kMaxJsonDepth).
void apply_override(nlohmann::json& doc, const std::string& assignment);

// Fills defaults from the schema, validates, checks cross-field rules (exactly one of
// batch.per_replica / batch.global; global divisible by replicas.count; the per-replica batch
// divisible by batch.accumulate_steps; nccl needs cuda and a
// CUDA build; dataset idx needs a root; simulated replicas sync by all-reduce only; easgd alpha at
// most 1 / replicas.count; weight_decay_groups patterns are valid regular expressions) and returns
// the typed spec. Every integer in the schema has a maximum (at most 2^53 - 1) that its typed
// field and the arithmetic on it can hold, so nothing is narrowed or overflows; strings longer
// than their maxLength are rejected before their pattern is tried. `source` (a file name)
// prefixes nothing; it is only used in messages that are not about one field. The sweep keys
// (sweep, sweep_zip, repeats) are validated and then dropped: `resolved` never holds them, and
// expanding them is expand_sweep's job (ddplab/config/sweep.h).
ExperimentSpec resolve(nlohmann::json doc, const std::string& source = "spec");

// load_json_file + every override in order: the document as the user means it, sweep keys
// (sweep, sweep_zip, repeats) still in (has_sweep and expand_sweep read them; resolve drops them).
nlohmann::json load_document(const std::string& path, const std::vector<std::string>& overrides = {});

// load_document + resolve.
ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides = {});

// The JSON Schema text (same as ddplab::schema_json()).
const char* schema_text();

// The data directory a dataset reads when dataset.root is "" ("" for idx: it has none). CIFAR's
// are the directories the official binary tarballs unpack to, under data/.
std::string default_root(DatasetName name);

// What the official files of a dataset hold: its classes and test images (nullopt for idx, whose
// files are the user's).
std::optional<int64_t> known_classes(DatasetName name);
std::optional<int64_t> known_test_samples(DatasetName name);

// The dataset named in a resolved spec document's "dataset.name" (a flattened or nested spec.json
// as the report reads it); nullopt when it names none that ddplab knows.
std::optional<DatasetName> dataset_of(const nlohmann::json& name);

}  // namespace ddplab::config
