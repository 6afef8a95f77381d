// The schema as resolve() applies it: defaults filled in, integers normalized (spec_steps.h), and
// the schema's defaults for readers of older specs (defaults.h).
#include <algorithm>
#include <cmath>

#include "ddplab/base/version.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {

using nlohmann::json;

const json& schema_doc() {
  static const json doc = json::parse(ddplab::schema_json());
  return doc;
}

const char* schema_text() { return ddplab::schema_json(); }

// For a node with "oneOf" alternatives (replicas.sync, debug.fault): the alternative that `value`
// is meant for (an enum listing it, an array alternative for an array, or an object alternative
// whose required keys it has), else nullptr.
// A node without alternatives is its own branch.
const json* branch_for(const json& value, const json& schema) {
  if (!schema.contains("oneOf")) return &schema;
  const json* found = nullptr;
  for (const auto& alt : schema["oneOf"]) {
    bool fits = false;
    if (alt.contains("enum")) {
      fits = std::find(alt["enum"].begin(), alt["enum"].end(), value) != alt["enum"].end();
    } else if (value.is_array() && alt.value("type", "") == "array") {
      fits = true;
    } else if (value.is_object() && alt.value("type", "") == "object" && alt.contains("required")) {
      fits = std::all_of(alt["required"].begin(), alt["required"].end(),
                         [&](const json& k) { return value.contains(k.get<std::string>()); });
    }
    if (!fits) continue;
    if (found != nullptr) return nullptr;  // ambiguous: let validation phrase it
    found = &alt;
  }
  return found;
}

void fill_defaults(json& doc, const json& node_schema) {
  if (!doc.is_object()) return;
  const json* schema = branch_for(doc, node_schema);
  if (schema == nullptr || !schema->contains("properties")) return;
  for (const auto& [key, sub] : (*schema)["properties"].items()) {
    if (!doc.contains(key) && sub.contains("default")) doc[key] = sub["default"];
    if (doc.contains(key)) fill_defaults(doc[key], sub);
  }
}

bool is_integer(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

// JSON Schema counts 64.0 and 1e2 as integers (a number with no fractional part); valijson does
// not. Writes them as integers wherever the schema asks for one, so they validate and read back.
void normalize_integers(json& doc, const json& node_schema) {
  if (doc.is_number_float() && node_schema.value("type", "") == "integer" && is_integer(doc) &&
      std::fabs(doc.get<double>()) <= 9007199254740992.0) {
    doc = static_cast<int64_t>(doc.get<double>());
    return;
  }
  if (doc.is_array() && node_schema.contains("items") && node_schema["items"].is_object()) {
    for (auto& item : doc) normalize_integers(item, node_schema["items"]);
    return;
  }
  if (!doc.is_object()) return;
  const json* schema = branch_for(doc, node_schema);
  if (schema == nullptr || !schema->contains("properties")) return;
  for (const auto& [key, sub] : (*schema)["properties"].items())
    if (doc.contains(key)) normalize_integers(doc[key], sub);
}

std::vector<std::string> options_the_model_lacks(const json& model) {
  std::vector<std::string> lacks;
  if (!model.is_object()) return lacks;
  const json& properties = schema_doc()["properties"]["model"]["properties"];
  const json name = model.value("name", properties["name"]["default"]);
  if (!name.is_string()) return lacks;  // validate() says what model.name must be
  for (const auto& [key, sub] : properties.items()) {
    if (!model.contains(key) || !sub.contains("models")) continue;
    const json& takes = sub["models"];
    if (std::find(takes.begin(), takes.end(), name) == takes.end()) lacks.push_back(key);
  }
  return lacks;
}

nlohmann::json without_options_the_model_lacks(nlohmann::json doc) {
  if (doc.contains("model"))
    for (const std::string& key : options_the_model_lacks(doc["model"])) doc["model"].erase(key);
  return doc;
}

nlohmann::json with_defaults(nlohmann::json doc) {
  fill_defaults(doc, schema_doc());
  return without_options_the_model_lacks(std::move(doc));
}

nlohmann::json upgraded_spec(nlohmann::json spec_json) {
  const json::json_pointer order("/dataset/order");
  if (spec_json.contains("dataset") && spec_json["dataset"].is_object() && !spec_json.contains(order))
    spec_json[order] = name(DataOrder::kTorchSampler);
  return with_defaults(std::move(spec_json));
}

}  // namespace ddplab::config
