// The schema, the typed spec and the field table agree: every schema property is a field (or is
// named as read by hand), every default is the struct's default, every enum spells the same names.
// A default changed in only one of schema.json and spec.h fails here.

#include <set>
#include <sstream>
#include <type_traits>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

const json& schema() {
  static const json s = json::parse(schema_text());
  return s;
}

// The schema node of a property, nullptr when there is none.
const json* property(const std::string& pointer) {
  const json* node = &schema();
  std::stringstream tokens(pointer.substr(1));
  std::string token;
  while (std::getline(tokens, token, '/')) {
    if (!node->contains("properties") || !(*node)["properties"].contains(token)) return nullptr;
    node = &(*node)["properties"][token];
  }
  return node;
}

// Every property that holds no properties of its own (a leaf of the spec).
void leaves(const json& node, const std::string& pointer, std::set<std::string>& out) {
  if (!node.contains("properties")) {
    out.insert(pointer);
    return;
  }
  for (const auto& [key, child] : node["properties"].items()) leaves(child, pointer + "/" + key, out);
}

template <class T>
json as_json(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return name(value);
  } else {
    return value;
  }
}

template <class E>
json names_of() {
  json names = json::array();
  for (const char* n : SettingNames<E>::names) names.push_back(n);
  return names;
}

// The schema default that resolve() replaces before the typed spec is made: backend "auto" is
// "gloo" on the default device (cpu).
json typed_default(const std::string& pointer, const json& schema_default) {
  if (pointer == "/replicas/backend" && schema_default == "auto") return name(Backend::kGloo);
  return schema_default;
}

TEST(SpecFields, EveryListedFieldHasTheSchemasDefaultAndEnum) {
  const ExperimentSpec defaults;
  int checked = 0;
  for_each_field(defaults, [&](const char* pointer, const auto& field) {
    using T = std::decay_t<decltype(field)>;
    const json* node = property(pointer);
    ASSERT_NE(node, nullptr) << pointer << " is not a schema property";
    ++checked;
    if (std::string(pointer) == "/name") return;  // required, no default
    ASSERT_TRUE(node->contains("default")) << pointer << " has no default in schema.json";
    EXPECT_EQ(as_json(field), typed_default(pointer, (*node)["default"]))
        << pointer << ": spec.h and schema.json disagree on the default";
    if constexpr (std::is_enum_v<T>) {
      json expected = (*node)["enum"];
      if (std::string(pointer) == "/replicas/backend")
        expected.erase(std::find(expected.begin(), expected.end(), "auto"));
      EXPECT_EQ(names_of<T>(), expected) << pointer << ": settings.h and schema.json spell the enum differently";
    }
  });
  EXPECT_GT(checked, 40);
}

TEST(SpecFields, EverySchemaPropertyIsAFieldOrNamedAsReadByHand) {
  std::set<std::string> listed;
  const ExperimentSpec defaults;
  for_each_field(defaults, [&](const char* pointer, const auto&) { listed.insert(pointer); });
  // spec.h's for_each_field says why each of these is not one field; report.* and slurm.* have their own structs.
  const std::set<std::string> by_hand = {
      "/batch/per_replica", "/batch/global",  "/optimizer/betas", "/optimizer/weight_decay_groups",
      "/model/layers",      "/replicas/sync", "/debug/fault",     "/sweep",
      "/sweep_zip",         "/repeats"};
  std::set<std::string> all;
  leaves(schema(), "", all);
  for (const auto& pointer : all) {
    if (pointer.rfind("/report/", 0) == 0 || pointer.rfind("/slurm/", 0) == 0) continue;
    EXPECT_TRUE(listed.count(pointer) + by_hand.count(pointer) == 1)
        << pointer << ": add it to for_each_field in config/spec.h (or to the by-hand list there and here)";
  }
}

TEST(SpecFields, TheFieldsReadByHandHaveTheSchemasDefaults) {
  const ExperimentSpec s;
  EXPECT_EQ(json::array({s.optimizer.beta1, s.optimizer.beta2}), (*property("/optimizer/betas"))["default"]);
  EXPECT_EQ(json::array(), (*property("/optimizer/weight_decay_groups"))["default"]);
  EXPECT_TRUE(s.optimizer.weight_decay_groups.empty());
  EXPECT_FALSE(property("/model/layers")->contains("default"));
  EXPECT_TRUE(s.model.layers.empty());
  EXPECT_EQ(names_of<LayerType>(), (*property("/model/layers"))["items"]["properties"]["type"]["enum"]);
  EXPECT_EQ(json(name(s.replicas.sync.method)), (*property("/replicas/sync"))["default"]);
  EXPECT_EQ(json("none"), (*property("/debug/fault"))["default"]);
  EXPECT_TRUE(s.debug.faults.empty());
  EXPECT_EQ(json(name(s.debug.audits)), (*property("/debug/audits"))["default"]);
}

TEST(SpecFields, ResolvingTheDefaultsGivesTheStructsDefaults) {
  const ExperimentSpec resolved = resolve(json{{"name", "x"}, {"batch", {{"per_replica", 64}}}});
  const ExperimentSpec defaults;
  std::map<std::string, json> got;
  for_each_field(resolved, [&](const char* pointer, const auto& field) { got[pointer] = as_json(field); });
  for_each_field(defaults, [&](const char* pointer, const auto& field) {
    const std::string p = pointer;
    if (p == "/name" || p == "/dataset/root" || p == "/replicas/threads") return;  // resolved from elsewhere
    EXPECT_EQ(got[p], as_json(field)) << p;
  });
}

}  // namespace
}  // namespace ddplab::config
