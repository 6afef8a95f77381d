// Every spec field's role is declared once, in schema.json (config/field_roles.h), and what a run
// is, how the report groups runs and which settings follow another are derived from it.

#include "ddplab/config/field_roles.h"

#include <set>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// Every leaf property of `node` (one without properties of its own), with its schema node.
void leaves(const json& node, const std::string& pointer, std::vector<std::pair<std::string, json>>& out) {
  if (!node.contains("properties")) {
    out.emplace_back(pointer, node);
    return;
  }
  for (const auto& [key, child] : node["properties"].items()) leaves(child, pointer + "/" + key, out);
}

std::vector<std::pair<std::string, json>> schema_leaves() {
  std::vector<std::pair<std::string, json>> out;
  const json schema = json::parse(schema_text());
  for (const auto& [key, child] : schema["properties"].items()) leaves(child, "/" + key, out);
  return out;
}

TEST(FieldRoles, EverySchemaLeafHasARole) {
  std::set<std::string> roles;
  for (const char* n : SettingNames<FieldRole>::names) roles.insert(n);
  const auto all = schema_leaves();
  EXPECT_GT(all.size(), 80u);
  for (const auto& [pointer, node] : all) {
    const json role = node.value("role", json());
    EXPECT_TRUE(role.is_string() && roles.count(role.get<std::string>()) == 1)
        << pointer << ": give its property in schema.json a \"role\" (one of those config/field_roles.h lists), got "
        << role.dump();
  }
}

TEST(FieldRoles, SpecFieldsAreTheSchemasLeavesAndFollowFields) {
  const auto all = schema_leaves();
  ASSERT_EQ(spec_fields().size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const SpecField& f = spec_fields()[i];
    EXPECT_EQ(f.pointer, all[i].first);
    EXPECT_EQ(name(f.role), all[i].second.value("role", ""));
    if (!f.follows.empty()) {
      EXPECT_NE(field_at(f.follows), nullptr) << f.pointer << " follows no field";
    }
  }
  EXPECT_EQ(field_at("/replicas/threads")->follows, "/replicas/count");
  EXPECT_EQ(field_at("/replicas/backend")->follows, "/replicas/device");
}

TEST(FieldRoles, AFieldHoldsThePointersBelowIt) {
  EXPECT_EQ(field_at("/model/layers/0/kernel")->pointer, "/model/layers");
  EXPECT_EQ(field_at("/replicas/sync/easgd/alpha")->pointer, "/replicas/sync");
  EXPECT_EQ(field_at("/replicas"), nullptr);
  EXPECT_EQ(field_at("/replicas/countless"), nullptr);
  EXPECT_EQ(field_at("/no_such_field"), nullptr);
}

// The roles of today's fields, as the hand lists before them had it (issue 55 item 4).
TEST(FieldRoles, TheRolesOfTheFieldsTheHandListsNamed) {
  const auto role = [](const char* pointer) { return field_at(pointer)->role; };
  EXPECT_EQ(role("/seed"), FieldRole::kSeed);
  for (const char* p : {"/name", "/output"}) EXPECT_EQ(role(p), FieldRole::kDirectory) << p;
  for (const char* p : {"/log/every_steps", "/log/tensorboard", "/checkpoint/every_epochs", "/checkpoint/keep"})
    EXPECT_EQ(role(p), FieldRole::kLogs) << p;
  for (const char* p : {"/replicas/timeout_s", "/replicas/max_restarts", "/debug/rank", "/debug/step", "/slurm/time"})
    EXPECT_EQ(role(p), FieldRole::kLauncher) << p;
  for (const char* p : {"/report/target_acc", "/report/labels"}) EXPECT_EQ(role(p), FieldRole::kReport) << p;
  for (const char* p : {"/sweep", "/sweep_zip", "/repeats"}) EXPECT_EQ(role(p), FieldRole::kSweep) << p;
  for (const char* p : {"/epochs", "/dataset/root", "/replicas/threads", "/replicas/prewarm_steps", "/debug/fault",
                        "/debug/audits", "/early_stop/patience"})
    EXPECT_EQ(role(p), FieldRole::kTrains) << p;
}

// fields_kept keeps a field exactly when its role is kept, whatever the field.
TEST(FieldRoles, FieldsKeptFollowsEveryFieldsRole) {
  json doc = resolve(json{{"name", "x"}, {"batch", {{"per_replica", 64}}}}).resolved;
  doc["report"] = {{"target_acc", 0.8}};
  doc["slurm"] = {{"partition", "p"}};
  doc["unknown_later_key"] = 1;
  for (bool (*keep)(FieldRole) : {&in_identity, &groups_runs}) {
    const json kept = fields_kept(doc, keep);
    for (const auto& [pointer, unused] : schema_leaves()) {
      const json::json_pointer p(pointer);
      if (!doc.contains(p)) continue;
      EXPECT_EQ(kept.contains(p), keep(field_at(pointer)->role)) << pointer;
    }
    EXPECT_TRUE(kept.contains("unknown_later_key"));
  }
  EXPECT_FALSE(fields_kept(doc, in_identity).contains("log")) << "a section left empty goes";
  EXPECT_FALSE(fields_kept(doc, groups_runs).contains("slurm"));
}

// debug.fault trains, but its drills (crash, throw, stop: the schema's launcher_values) are the
// launcher's: wherever the launcher's fields go, they go too, and the bugs left read alike in any
// order (last stop's review: the report grouped runs by the whole value, the resume check did not).
TEST(FieldRoles, DebugFaultsDrillsGoWhereTheLaunchersFieldsGo) {
  const auto fault_kept = [](const json& fault, bool (*keep)(FieldRole)) {
    return fields_kept(json{{"debug", {{"fault", fault}, {"rank", 1}}}}, keep)["debug"].value("fault", json());
  };
  for (bool (*keep)(FieldRole) : {&in_identity, &groups_runs}) {
    EXPECT_EQ(fault_kept("crash", keep), "none");
    EXPECT_EQ(fault_kept(json::array({"stop", "skip_broadcast"}), keep), "skip_broadcast");
    EXPECT_EQ(fault_kept(json::array({"update_first_only", "crash", "skip_broadcast"}), keep),
              json::array({"skip_broadcast", "update_first_only"}));
    EXPECT_EQ(fault_kept("one_sided_sigmoid_loss", keep), "one_sided_sigmoid_loss");
  }
  EXPECT_EQ(fault_kept(json::array({"stop", "skip_broadcast"}), in_run_spec), json::array({"stop", "skip_broadcast"}))
      << "spec.json keeps what was given";
}

TEST(FieldRoles, IdentityAndGroupingPerRole) {
  EXPECT_TRUE(in_identity(FieldRole::kTrains) && groups_runs(FieldRole::kTrains));
  EXPECT_TRUE(in_identity(FieldRole::kSeed) && !groups_runs(FieldRole::kSeed));
  EXPECT_TRUE(!in_identity(FieldRole::kLogs) && groups_runs(FieldRole::kLogs));
  for (FieldRole r : {FieldRole::kDirectory, FieldRole::kLauncher, FieldRole::kReport, FieldRole::kSweep})
    EXPECT_TRUE(!in_identity(r) && !groups_runs(r)) << name(r);
}

}  // namespace
}  // namespace ddplab::config
