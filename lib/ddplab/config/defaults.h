// The schema's defaults, for readers of specs that were written by another ddplab version.
#pragma once
#include <nlohmann/json.hpp>

namespace ddplab::config {

// `doc` with the schema's default filled in for every missing field that has one, recursively
// (no validation, nothing else changed): what a spec.json written before a field existed means
// today. The report groups runs by it, so a run made before model.ema_decay or log.every_steps
// existed groups with a run of today that leaves them at their defaults.
nlohmann::json with_defaults(nlohmann::json doc);

}  // namespace ddplab::config
