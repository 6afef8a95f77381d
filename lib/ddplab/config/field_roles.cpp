#include "ddplab/config/field_roles.h"

#include <algorithm>

#include <c10/util/Exception.h>

#include "ddplab/config/spec.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

FieldRole role_named(const json& node, const std::string& pointer) {
  const auto& names = SettingNames<FieldRole>::names;
  const std::string text = node.is_string() ? node.get<std::string>() : "";
  size_t i = 0;
  while (i < names.size() && text != names[i]) ++i;
  TORCH_INTERNAL_ASSERT(i < names.size(), "schema.json: ", pointer, " has no role (", node.dump(),
                        "); field_roles.h lists them");
  return static_cast<FieldRole>(i);
}

void add_leaves(const json& node, const std::string& pointer, std::vector<SpecField>& out) {
  if (!node.contains("properties")) {
    out.push_back({pointer, role_named(node.value("role", json()), pointer), node.value("follows", "")});
    return;
  }
  for (const auto& [key, child] : node["properties"].items()) add_leaves(child, pointer + "/" + key, out);
}

// The values of the field at `pointer` that are the launcher's though the field's role is not:
// its schema's "launcher_values" (debug.fault's drills crash, throw and stop), else none.
const json& launcher_values(const std::string& pointer) {
  static const json none = json::array();
  const json* node = &schema_doc();
  for (size_t at = 1; at < pointer.size();) {
    const size_t end = std::min(pointer.find('/', at), pointer.size());
    const std::string key = pointer.substr(at, end - at);
    if (!node->contains("properties") || !(*node)["properties"].contains(key)) return none;
    node = &(*node)["properties"][key];
    at = end + 1;
  }
  return node->contains("launcher_values") ? (*node)["launcher_values"] : none;
}

// `value` (a name or a list of names) without the names in `drop`, in one spelling for one set:
// "none" when none is left, the name when one is, else the names sorted.
json without_values(const json& value, const json& drop) {
  std::vector<std::string> left;
  for (const json& v : value.is_array() ? value : json::array({value}))
    if (v.is_string() && v != "none" && std::find(drop.begin(), drop.end(), v) == drop.end())
      left.push_back(v.get<std::string>());
  std::sort(left.begin(), left.end());
  if (left.empty()) return "none";
  return left.size() == 1 ? json(left.front()) : json(left);
}

// Erases from the object `node`, at `pointer`, each field that `keep` refuses, and each object
// that this leaves empty. Where `keep` refuses the launcher, a kept field's launcher values go too.
void erase_refused(json& node, const std::string& pointer, bool (*keep)(FieldRole)) {
  for (auto it = node.begin(); it != node.end();) {
    const std::string child = pointer + "/" + escape_token(it.key());
    const SpecField* field = field_at(child);
    bool erase = field != nullptr && !keep(field->role);
    if (!erase && field != nullptr && field->pointer == child && !keep(FieldRole::kLauncher))
      if (const json& drills = launcher_values(child); !drills.empty()) *it = without_values(*it, drills);
    if (field == nullptr && it->is_object() && !it->empty()) {
      erase_refused(*it, child, keep);
      erase = it->empty();
    }
    it = erase ? node.erase(it) : std::next(it);
  }
}

// What a role decides, as field_roles.h's table says.
struct Decides {
  bool identity;
  bool groups;
  bool in_spec;
  bool sweepable;
};

Decides decides(FieldRole role) {
  switch (role) {
    case FieldRole::kTrains:
      return {true, true, true, true};
    case FieldRole::kSeed:
      return {true, false, true, true};
    case FieldRole::kLogs:
      return {false, true, true, true};
    case FieldRole::kDirectory:
      return {false, false, true, false};
    case FieldRole::kLauncher:
    case FieldRole::kReport:
      return {false, false, true, true};
    case FieldRole::kSweep:
      return {false, false, false, false};
  }
  return {false, false, false, false};
}

}  // namespace

bool in_identity(FieldRole role) { return decides(role).identity; }

bool groups_runs(FieldRole role) { return decides(role).groups; }

bool in_run_spec(FieldRole role) { return decides(role).in_spec; }

bool sweepable(FieldRole role) { return decides(role).sweepable; }

const std::vector<SpecField>& spec_fields() {
  static const std::vector<SpecField> fields = [] {
    std::vector<SpecField> out;
    for (const auto& [key, child] : schema_doc()["properties"].items()) add_leaves(child, "/" + key, out);
    return out;
  }();
  return fields;
}

const SpecField* field_at(const std::string& pointer) {
  for (const SpecField& f : spec_fields())
    if (pointer.compare(0, f.pointer.size(), f.pointer) == 0 &&
        (pointer.size() == f.pointer.size() || pointer[f.pointer.size()] == '/'))
      return &f;
  return nullptr;
}

nlohmann::json fields_kept(nlohmann::json doc, bool (*keep)(FieldRole)) {
  if (doc.is_object()) erase_refused(doc, "", keep);
  return doc;
}

}  // namespace ddplab::config
