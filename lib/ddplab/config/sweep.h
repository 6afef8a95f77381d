// Sweep expansion: one spec document with `sweep`, `sweep_zip` and `repeats` becomes a list of
// fully resolved runs.
//
//   "sweep":     {"replicas.count": [1, 2], "schedule.scale_rule": ["none", "linear"]}
//   "sweep_zip": {"replicas.count": [1, 2], "batch.per_replica": [128, 64]}   (one axis)
//   "repeats":   3                                                            (seeds seed..seed+2)
//
// Axes, outermost first: each `sweep` key (in file order when `key_order` gives it, else by key
// name), then the `sweep_zip` axis (its arrays all the same length, moving together), then the
// seed. The runs are the cartesian product of the axes, the last axis varying fastest. Each run's
// document is the input without sweep/sweep_zip/repeats, with its values set through the same
// dotted-path mechanism as command-line overrides (an object value replaces the whole section),
// then resolve()'d. A swept `seed` sets the base seed that `repeats` counts up from.
//
// Run ids name every swept key with its full dotted path, then the seed:
//   "replicas.count=2,schedule.scale_rule=linear,seed=3"   (a spec without a sweep: "seed=3")
// Strings appear unquoted, other values as compact JSON; any character outside
// [A-Za-z0-9._=,+-] becomes '_' and ".." becomes "._", so an id is always a safe directory name.
// Two runs with the same id are an error.
//
// Errors (ddplab::Error) name the sweep entry: "/sweep/optimizer.lr/1: must be > 0, got -1",
// "/sweep_zip/batch.per_replica: must have 2 values like replicas.count, got 3",
// "/sweep/name: cannot be swept ...". A run that fails to resolve for a reason that is not about
// one swept key is named by its run id: "/sweep: run replicas.count=4,seed=1: /batch/global: ...".
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"

namespace ddplab::config {

struct SweepRun {
  std::string run_id;
  nlohmann::ordered_json assignments;  // dotted key -> value, in axis order, "seed" last
  ExperimentSpec spec;                 // resolved; spec.run_id == run_id
};

// The most runs one spec may expand to (also the schema's maximum of `repeats`).
constexpr size_t kMaxSweepRuns = 100000;
// The longest run id: a run directory's name (NAME_MAX on Linux file systems).
constexpr size_t kMaxRunIdChars = 255;

// A run id given on the command line (`ddplab run --run-id`, `ddplab worker --run-id`): a
// directory name of [A-Za-z0-9._=,+-] without "..", at most kMaxRunIdChars, as the ids a sweep
// makes are. Throws an Error naming --run-id otherwise.
void check_run_id_flag(const std::string& run_id);

// Expands `doc` (a whole spec, overrides already applied) into its runs, in order.
// `source` names the file in messages that are not about one field; `key_order` lists sweep and
// sweep_zip keys in the order they should become axes (see sweep_key_order); keys it does not
// list follow, sorted by name. More than `max_runs` runs is an Error ("/sweep: expands to more
// than 100000 runs") raised before any run is resolved; every run costs about a millisecond and
// a few KB, so the fuzz targets pass a smaller limit to keep each input fast.
std::vector<SweepRun> expand_sweep(const nlohmann::json& doc, const std::string& source,
                                   const std::vector<std::string>& key_order = {}, size_t max_runs = kMaxSweepRuns);

// The keys of "sweep", then of "sweep_zip", in the order the file at `path` writes them
// (nlohmann::json sorts object keys, so the order is read again here). Empty when the file
// cannot be read or parsed.
std::vector<std::string> sweep_key_order(const std::string& path);

// The same for the text of a spec file (what sweep_key_order reads from `path`); used by the
// spec fuzz target, which has bytes, not a file.
std::vector<std::string> sweep_key_order_of_text(const std::string& json_text);

// A spec file as every command that runs or checks it reads it: the document (overrides applied)
// and its runs.
struct Sweep {
  nlohmann::json doc;          // load_document's
  std::vector<SweepRun> runs;  // expand_sweep(doc) in the file's key order; one run without sweep keys
};
// load_document + expand_sweep in the file's key order (sweep_key_order). Throws ddplab::Error as they do.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides = {});

// True when `doc` has any of sweep, sweep_zip or repeats (even a trivial one).
bool has_sweep(const nlohmann::json& doc);

// What `run` changes relative to `base` (both resolved spec documents), one line per JSON
// pointer, sorted: "/batch/global: added 128", "/batch/per_replica: removed", "/replicas/count: 1 -> 2".
std::vector<std::string> resolved_differences(const nlohmann::json& base, const nlohmann::json& run);

}  // namespace ddplab::config
