// What a run's event file holds, read from its run directory: shared by the export (export.h)
// and the file a run writes while it trains (live.h), so both write the same scalars.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/rundir/run_data.h"
#include "ddplab/tensorboard/events.h"

namespace ddplab::tensorboard {

struct Scalar {
  int64_t step = 0;  // training samples seen
  double wall_time = 0;
  std::string tag;
  double value = 0;
};

// The run's scalars (export.h lists the tags), sorted by step, at wall time `start` (the training
// clock's start: the manifest's train_start, its start for runs without one) + the records'
// wall_s / elapsed_s; a value that is not finite is left out. Sorted because
// TensorBoard's data server drops a tag's points beyond a step that comes later in the file.
std::vector<Scalar> run_scalars(const rundir::RunData& run, double start);

// The manifest's "host" for an event file's name (event_file_name), "ddplab" when it has none.
std::string manifest_host(const nlohmann::json& manifest);

// A spec value as an hparam: a number, string or bool as it is; an array or object as its JSON
// text; nullopt for null.
std::optional<HParamValue> hparam_value(const nlohmann::json& value);

}  // namespace ddplab::tensorboard
