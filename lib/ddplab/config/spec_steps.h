// The steps of resolve() (spec.h), one concern per file, declared for each other; internal to
// config/:
//   spec_json.cpp      JSON text and files, command-line overrides
//   spec_schema.cpp    the schema: its document, defaults filled in, integers normalized
//   schema_errors.cpp  what the schema refuses, said for a person (unknown keys, valijson's errors)
//   spec_rules.cpp     the cross-field rules (model_rules.cpp: the model section's)
//   spec.cpp           resolve() in order, and the typed mapping (for_each_field, the fields read by hand)
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddplab::config {

// spec_schema.cpp

// schema.json, parsed once.
const nlohmann::json& schema_doc();
// For a node with "oneOf" alternatives (replicas.sync, debug.fault): the alternative that `value`
// is meant for, else nullptr. A node without alternatives is its own branch.
const nlohmann::json* branch_for(const nlohmann::json& value, const nlohmann::json& schema);
// Fills the schema's default into `doc` for every missing property that has one, recursively.
void fill_defaults(nlohmann::json& doc, const nlohmann::json& node_schema);
// Whether `v` is a number with no fractional part (JSON Schema's integer).
bool is_integer(const nlohmann::json& v);
// Writes 64.0 and 1e2 as integers wherever the schema asks for one (valijson would refuse them).
void normalize_integers(nlohmann::json& doc, const nlohmann::json& node_schema);
// The keys of `model` (a spec's model section) that the schema gives a "models" list leaving out
// model.name (the schema's default name when it has none): options such as model.hidden that the
// chosen model does not use.
std::vector<std::string> options_the_model_lacks(const nlohmann::json& model);
// `doc` without the model options its model lacks (options_the_model_lacks): what spec.json and
// upgraded_spec hold, so that a spec never names a setting that does nothing.
nlohmann::json without_options_the_model_lacks(nlohmann::json doc);

// schema_errors.cpp

// Rejects the first unknown key (naming the nearest known one) and strings longer than their
// maxLength, before defaults hide a typo and before valijson tries a long string's pattern.
void precheck(const nlohmann::json& doc, const nlohmann::json& node_schema, const std::string& pointer);
// Validates `doc` against the schema; throws Error "<pointer>: <expectation>, got <value>".
void validate(const nlohmann::json& doc);

// spec_rules.cpp, model_rules.cpp

// debug.fault's names: the one name, or the array's (validated by the schema).
std::vector<std::string> fault_names(const nlohmann::json& fault);
// Names the model after model.layers or model.torchscript when it gives one of them alone.
void infer_model_name(nlohmann::json& doc);
// The cross-field rules of a validated document (resolve()'s comment lists them); fills what they
// decide (backend "auto", an empty dataset root, replicas.threads 0, each layer's defaults).
void check_cross_fields(nlohmann::json& doc);
// model.name against model.layers and model.torchscript; each layer checked and completed.
void check_model(nlohmann::json& model);
// Refuses a model option given for a model that does not use it (options_the_model_lacks), naming
// the models that do. `model` is the spec's model section as given, before defaults fill it in.
void check_model_options(const nlohmann::json& model);

}  // namespace ddplab::config
