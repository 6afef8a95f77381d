// A feature of training that the Trainer's loop calls at fixed points (hooks), as a Lightning
// callback: the gradient noise scale, early stop and best.pt, the weight EMA's state, ReplicaSync's
// state, GradReducer's, step records, the profiler, the denormal note. A stateful part owns its
// checkpoint state (save / load, its own keys in the checkpoint, as torch's Module::state_dict), so
// a new feature is its part's file, its test and one line in parts.cpp's registry; the Trainer is
// not edited (docs/architecture.md, "A per-epoch feature").
//
// Every rank makes the same parts and calls the same hooks in the same order (the registry's), so a
// hook may run a collective where every rank runs it. Writes to the run directory and notes go
// through the RunWriter (run_writer.h), which writes on rank 0 only.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/epoch_totals.h"
#include "ddplab/train/step_log.h"

namespace ddplab::distributed {
class GradReducer;
}

namespace ddplab::train {

struct Network;
class EpochModel;
class LocalReplicas;
class ReplicaSync;
class RunWriter;

// What a part may use of the run; everything outlives the parts.
struct PartContext {
  const config::ExperimentSpec& spec;
  const distributed::World& world;
  Network& net;
  distributed::GradReducer& reducer;
  LocalReplicas& replicas;
  ReplicaSync& sync;
  EpochModel& epoch_model;
  std::shared_ptr<distributed::Comm> comm;  // null for one process
  RunWriter& writer;
  int64_t steps_per_epoch = 0;
};

// Right after a step's optimizer update, before ReplicaSync's averaging or elastic step.
struct StepUpdate {
  int64_t global_step = 0;  // the step just taken, 0-based
  at::Tensor grad_sq;       // |reduced gradient|^2, 0-dim on the device
  bool reduced = false;     // its gradients were all-reduced over 2+ replicas
};

// At the end of a step, its averaging and evaluation point included.
struct StepEnd {
  int64_t step = 0;          // in the epoch, 0-based
  int64_t global_steps = 0;  // taken so far, this one counted
  double lr = 0;
  double elapsed_s = 0;  // training time so far
  const EpochTotals& totals;
  const std::optional<EvalPoint>& point;  // the evaluation point after this step, if one fell there
};

// A clean stop after step `step`: the epoch's training sums over all replicas so far.
struct StopPoint {
  int64_t step = 0, global_steps = 0;
  double lr = 0, elapsed_s = 0, loss_sum = 0, correct = 0;
};

class Part {
 public:
  virtual ~Part() = default;

  // Epoch `epoch` (0-based) starts at `first_step` (a resumed epoch's); `loss_sum` and `correct`:
  // the replicas' training sums the checkpoint restored (zeros but in a resumed epoch).
  virtual void start_epoch(int /*epoch*/, int64_t /*first_step*/, double /*loss_sum*/, double /*correct*/) {}
  // Around one step (global step `global_step`, 0-based).
  virtual void begin_step(int64_t /*global_step*/) {}
  virtual void after_update(const StepUpdate& /*update*/) {}
  virtual void after_step(const StepEnd& /*end*/) {}
  virtual void end_step(int64_t /*global_step*/) {}
  // A clean stop (SIGINT/SIGTERM), before its checkpoint.
  virtual void at_stop(const StopPoint& /*stop*/) {}

  // The epoch's record, about to be written: a part adds its fields, or writes what readers of the
  // run directory expect before it (the epoch's step records: a live TensorBoard file reads both).
  virtual void before_record(rundir::EpochRecord& /*rec*/) {}
  // After the record was written and found not blown up (every rank holds the same record).
  virtual void end_epoch(const rundir::EpochRecord& /*rec*/) {}
  // Whether training stops before epoch `epochs_done` (0-based) begins.
  virtual bool stops_before(int64_t /*epochs_done*/) const { return false; }
  // After the last epoch trained (`epochs_done` in all), before the model is saved.
  virtual void end_run(int64_t /*epochs_done*/) {}
  // Training failed (diverged, an audit, an error); the exception goes on after every part's call.
  virtual void on_failure() {}

  // Into a checkpoint: every rank calls it (it may gather), rank 0 writes what it set.
  virtual void save(PartState& /*state*/) {}
  // From the checkpoint `file` a run resumes from (every rank reads rank 0's); an Error naming
  // `file` when the state does not fit this run.
  virtual void load(const PartState& /*state*/, const std::filesystem::path& /*file*/) {}
};

// One registered part: its name and its maker, which returns null when the spec leaves it off.
struct PartEntry {
  const char* name;
  std::unique_ptr<Part> (*make)(const PartContext& context);
};

// In lib/ddplab/train/<name>_part.cpp, after the part:
//   DDPLAB_REGISTER_PART(noise_scale, &make);
// and parts.cpp's DDPLAB_FOR_EACH_PART lists it: X(noise_scale).
#define DDPLAB_PART_ENTRY(name) part_entry_##name
#define DDPLAB_REGISTER_PART(name, make) \
  extern const PartEntry DDPLAB_PART_ENTRY(name) { #name, make }

// The registered entries, in the registry's order (the order every hook calls the parts in).
const std::vector<const PartEntry*>& part_entries();
// The parts the spec turns on, in that order.
std::vector<std::unique_ptr<Part>> make_parts(const PartContext& context);

}  // namespace ddplab::train
