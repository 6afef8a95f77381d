// The schema's defaults, for readers of specs that were written by another ddplab version.
#pragma once
#include <nlohmann/json.hpp>

namespace ddplab::config {

// `doc` with the schema's default filled in for every missing field that has one, recursively,
// and the model options its model does not use left out (model.hidden but for mlp); no validation.
nlohmann::json with_defaults(nlohmann::json doc);

// What a run's spec.json written by an earlier ddplab means today: each field it lacks filled
// with what that ddplab did, which is the field's schema default (with_defaults) except where the
// default differs from the behaviour before the field existed: dataset.order then reads
// "torch_sampler" (every run before 2026-12-03 drew its epochs' order from seed + epoch). The
// report groups runs by it, so a run made before model.ema_decay existed groups with a run of
// today that leaves it at 0; a run directory is compared with a spec through it (spec_changes).
nlohmann::json upgraded_spec(nlohmann::json spec_json);

}  // namespace ddplab::config
