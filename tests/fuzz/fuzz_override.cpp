// libFuzzer target: command-line overrides (config::apply_override) on a spec document, as in
// `ddplab run spec.json key=value ...`. The input is the document's JSON text, then each
// override, separated by NUL bytes (an argv string cannot hold one); a document that does not
// parse is replaced by {"name":"fuzz"} so that the overrides still get exercised. After the
// overrides, the key path of each must hold the value it set, and the document goes through
// expand_sweep and check_runs (tests/fuzz/fuzz_check.h) like a spec file.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "fuzz_check.h"
#include "spec_checks.h"

namespace {

constexpr size_t kMaxOverrides = 8;

// The value `assignment` left in `doc`, found by walking its dotted key.
const nlohmann::json* value_at(const nlohmann::json& doc, const std::string& assignment) {
  std::stringstream key(assignment.substr(0, assignment.find('=')));
  const nlohmann::json* node = &doc;
  for (std::string part; std::getline(key, part, '.');) {
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
  }
  return node;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddplab;
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\0') {
      if (parts.size() > kMaxOverrides) break;
      parts.emplace_back();
    } else {
      parts.back() += static_cast<char>(data[i]);
    }
  }
  nlohmann::json doc;
  try {
    doc = config::parse_json_text(parts[0], "fuzz.json");
  } catch (const Error&) {
    doc = {{"name", "fuzz"}};
  }
  try {
    for (size_t i = 1; i < parts.size(); ++i) {
      config::apply_override(doc, parts[i]);
      DDPLAB_FUZZ_CHECK(value_at(doc, parts[i]) != nullptr);
      (void)doc.dump();  // error messages and spec.json dump what overrides set
    }
    fuzz::check_runs(config::expand_sweep(doc, "fuzz.json", {}, fuzz::kMaxRuns));
  } catch (const Error&) {
  }
  return 0;
}
