// libFuzzer target: a spec file's bytes through what `ddplab run spec.json` does before any
// run starts: parse (config::parse_json_text, load_json_file's parser), sweep_key_order,
// expand_sweep (which resolves every run), then check_runs (tests/fuzz/fuzz_check.h).
// ddplab::Error is the expected answer to bad input; anything else escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "spec_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddplab;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    nlohmann::json doc = config::parse_json_text(text, "fuzz.json");
    fuzz::check_runs(config::expand_sweep(doc, "fuzz.json", config::sweep_key_order_of_text(text), fuzz::kMaxRuns));
  } catch (const Error&) {
  }
  return 0;
}
