// What the schema refuses, said for a person: unknown keys with the nearest known one, valijson's
// errors as "<pointer>: <expectation>, got <value>" (spec_steps.h).
#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// Built once: schema parsing is the slow part of validation. Schema is not copyable.
const valijson::Schema& compiled_schema() {
  static const valijson::Schema* schema = [] {
    auto* s = new valijson::Schema;  // leaked on purpose: lives for the process
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(schema_doc());
    parser.populateSchema(adapter, *s);
    return s;
  }();
  return *schema;
}

std::string number_text(const json& n) { return n.dump(); }

size_t levenshtein(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// "\"allreduce\", {\"local_sgd\": {...}}, {\"easgd\": {...}}": what a oneOf node accepts.
std::string alternatives_text(const json& schema) {
  std::string out;
  for (const auto& alt : schema["oneOf"]) {
    if (alt.contains("enum")) {
      for (const auto& v : alt["enum"]) out += (out.empty() ? "" : ", ") + v.dump();
    } else if (alt.contains("required") && !alt["required"].empty()) {
      out += (out.empty() ? "" : ", ") + std::string("{\"") + alt["required"][0].get<std::string>() + "\": {...}}";
    } else if (alt.value("type", "") == "array") {
      out += ", or an array of them";
    }
  }
  return out;
}

// The known name nearest to `name` (the first of equals) within edit distance `within`; "" when none.
std::string nearest_name(const std::string& name, const std::vector<std::string>& known, size_t within) {
  std::string best;
  size_t best_distance = within + 1;
  for (const auto& k : known)
    if (const size_t d = levenshtein(name, k); d < best_distance) best_distance = d, best = k;
  return best;
}

// "; did you mean \"relu\"?" for a string `value` that is near one of the strings `schema` lists
// (its enum, or its alternatives' enums), else "". Near: an edit for every 3 characters (at least
// one), so that a short value is not "corrected" to another word ("avg" is not "sum").
std::string suggestion(const json& value, const json& schema) {
  if (!value.is_string()) return "";
  std::vector<std::string> options;
  const auto add = [&](const json& node) {
    if (node.contains("enum"))
      for (const auto& v : node["enum"])
        if (v.is_string()) options.push_back(v.get<std::string>());
  };
  add(schema);
  if (schema.contains("oneOf"))
    for (const auto& alt : schema["oneOf"]) add(alt);
  const std::string& got = value.get_ref<const std::string&>();
  const std::string best = nearest_name(got, options, std::max<size_t>(1, got.size() / 3));
  return best.empty() || best == got ? "" : fmt::format("; did you mean \"{}\"?", best);
}

// The properties a node may hold: its own, or (oneOf) those of every object alternative.
json known_properties(const json& schema) {
  if (schema.contains("properties")) return schema["properties"];
  json props = json::object();
  if (schema.contains("oneOf"))
    for (const auto& alt : schema["oneOf"])
      if (alt.contains("properties")) props.update(alt["properties"]);
  return props;
}

// Phrases what `schema` expects of `value`, or "" when this node's own keywords are satisfied
// (then the failure came from deeper or from a keyword we do not phrase).
std::string expectation(const json& value, const json& schema) {
  if (schema.contains("type")) {
    const std::string type = schema["type"].get<std::string>();
    bool ok = (type == "integer" && is_integer(value)) || (type == "number" && value.is_number()) ||
              (type == "string" && value.is_string()) || (type == "boolean" && value.is_boolean()) ||
              (type == "object" && value.is_object()) || (type == "array" && value.is_array()) ||
              (type == "null" && value.is_null());
    if (!ok) {
      bool vowel = type == "integer" || type == "object" || type == "array";
      return std::string("must be ") + (vowel ? "an " : "a ") + type;
    }
  }
  if (schema.contains("enum")) {
    const json& options = schema["enum"];
    if (std::find(options.begin(), options.end(), value) == options.end()) {
      std::string list;
      for (const auto& o : options) list += (list.empty() ? "" : ", ") + o.dump();
      return "must be one of " + list;
    }
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>())
      return "must be >= " + number_text(schema["minimum"]);
    if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>())
      return "must be > " + number_text(schema["exclusiveMinimum"]);
    if (schema.contains("maximum") && v > schema["maximum"].get<double>())
      return "must be <= " + number_text(schema["maximum"]);
    if (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>())
      return "must be < " + number_text(schema["exclusiveMaximum"]);
  }
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (schema.contains("minLength") && s.size() < schema["minLength"].get<size_t>())
      return "must be at least " + number_text(schema["minLength"]) + " characters";
    if (schema.contains("maxLength") && s.size() > schema["maxLength"].get<size_t>())
      return "must be at most " + number_text(schema["maxLength"]) + " characters";
    if (schema.contains("pattern") && !std::regex_search(s, std::regex(schema["pattern"].get<std::string>())))
      return "must match " + schema["pattern"].dump();
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      return "must have at least " + number_text(schema["minItems"]) + " items";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return "must have at most " + number_text(schema["maxItems"]) + " items";
  }
  return "";
}

// Turns the most specific valijson error into "<pointer>: <expectation>, got <value>".
std::string describe(const json& doc, const valijson::ValidationResults::Error& error) {
  std::string pointer;
  const json* value = &doc;
  const json* schema = &schema_doc();
  // context is {"<root>", "[key]", "[index]", ...}
  for (size_t i = 1; i < error.context.size(); ++i) {
    if (value != nullptr && schema != nullptr) schema = branch_for(*value, *schema);
    std::string token = error.context[i];
    if (token.size() >= 2 && token.front() == '[' && token.back() == ']') token = token.substr(1, token.size() - 2);
    pointer += "/" + escape_token(token);
    if (value != nullptr && value->is_array() && schema != nullptr && schema->contains("items")) {
      size_t index = std::stoul(token);
      value = index < value->size() ? &(*value)[index] : nullptr;
      schema = &(*schema)["items"];
    } else if (value != nullptr && value->is_object()) {
      value = value->contains(token) ? &(*value)[token] : nullptr;
      schema = (schema != nullptr && schema->contains("properties") && (*schema)["properties"].contains(token))
                   ? &(*schema)["properties"][token]
                   : nullptr;
    } else {
      value = nullptr;
      schema = nullptr;
    }
  }
  if (value != nullptr && schema != nullptr && schema->contains("oneOf")) {
    const json* branch = branch_for(*value, *schema);
    if (branch == nullptr)
      return pointer + ": must be one of " + alternatives_text(*schema) + ", got " + value->dump() +
             suggestion(*value, *schema);
    schema = branch;
  }
  if (value != nullptr && schema != nullptr) {
    if (value->is_object() && schema->contains("required")) {
      for (const auto& key : (*schema)["required"])
        if (!value->contains(key.get<std::string>())) return pointer + "/" + key.get<std::string>() + ": is required";
    }
    std::string what = expectation(*value, *schema);
    if (!what.empty()) return pointer + ": " + what + ", got " + value->dump() + suggestion(*value, *schema);
  }
  return (pointer.empty() ? "/" : pointer) + ": " + error.description;
}

}  // namespace

// Rejects, before valijson sees the document: the first key the schema does not know (before
// defaults hide typos), and strings longer than their maxLength (valijson would also try their
// pattern with std::regex, which recurses once per character: a long name overflowed the stack).
void precheck(const json& doc, const json& node_schema, const std::string& pointer) {
  if (doc.is_string() && node_schema.contains("maxLength") &&
      doc.get_ref<const std::string&>().size() > node_schema["maxLength"].get<size_t>())
    throw Error(fmt::format("{}: must be at most {} characters, got {}", pointer.empty() ? "/" : pointer,
                            number_text(node_schema["maxLength"]), doc.get_ref<const std::string&>().size()));
  if (doc.is_array() && node_schema.contains("items") && node_schema["items"].is_object()) {
    for (size_t i = 0; i < doc.size(); ++i) precheck(doc[i], node_schema["items"], fmt::format("{}/{}", pointer, i));
    return;
  }
  if (!doc.is_object()) return;
  const json* branch = branch_for(doc, node_schema);
  const json& schema = branch != nullptr ? *branch : node_schema;
  const json props = known_properties(schema);
  if (props.empty()) return;
  bool closed = schema.value("additionalProperties", true) == false || schema.contains("oneOf");
  for (const auto& [key, value] : doc.items()) {
    std::string child = pointer + "/" + escape_token(key);
    if (props.contains(key)) {
      precheck(value, props[key], child);
      continue;
    }
    if (!closed) continue;
    std::vector<std::string> known;
    std::string allowed;
    for (const auto& [name, unused] : props.items()) {
      known.push_back(name);
      allowed += (allowed.empty() ? "" : ", ") + name;
    }
    if (const std::string best = nearest_name(key, known, 3); !best.empty())
      throw Error(child + ": unknown key; did you mean \"" + best + "\"?");
    throw Error(child + ": unknown key; allowed keys: " + allowed);
  }
}

void validate(const json& doc) {
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(doc);
  if (validator.validate(compiled_schema(), target, &results)) return;
  // The deepest context is the most specific; among equals, the first reported.
  const valijson::ValidationResults::Error* best = nullptr;
  for (const auto& e : results) {
    if (best == nullptr || e.context.size() > best->context.size()) best = &e;
  }
  throw Error(describe(doc, *best));
}

}  // namespace ddplab::config
