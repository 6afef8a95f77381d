// Errors about a spec value that only show once the spec meets the data, the model or the
// machine (a global batch larger than the dataset, a crop larger than its images, a GPU that is
// not there), thrown by the layers that find them. The config layer spells every message that
// names a spec JSON pointer: resolve() for what the spec alone decides, spec_error() for these.
// scripts/house-rules.py (spec-pointers) flags a pointer spelled in a string elsewhere.
#pragma once
#include <string>
#include <string_view>

#include "ddplab/base/error.h"

namespace ddplab::config {

// "<pointer>: <what>", e.g. spec_error("/batch", "is larger than ...").what() ==
// "/batch: is larger than ...". `pointer` is a JSON pointer into the spec (RFC 6901; a key
// with '/' or '~' escaped by escape_token), never empty.
Error spec_error(std::string_view pointer, std::string_view what);

}  // namespace ddplab::config
