#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/config/defaults.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/spec.h"
#include "ddplab/report/analysis.h"

using nlohmann::json;

namespace ddplab::report {

namespace {
int64_t int_field(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

bool array_of_objects(const json& j) {
  return j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_object(); });
}

// Objects become dotted keys, and so do arrays of objects, indexed as a sweep names them
// (model.layers.0.channels); other arrays and scalars are leaves.
void flatten(const json& j, const std::string& prefix, json& out) {
  const auto key = [&](const std::string& k) { return prefix.empty() ? k : fmt::format("{}.{}", prefix, k); };
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), key(it.key()), out);
  } else if (array_of_objects(j)) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], key(fmt::format("{}", i)), out);
  } else if (!prefix.empty()) {
    out[prefix] = j;
  }
}

// The spec without the fields whose role does not group runs (config/field_roles.h), flattened.
json group_key(const json& spec) {
  json s = spec.is_object() ? config::fields_kept(config::upgraded_spec(spec), config::groups_runs) : json::object();
  json flat = json::object();
  flatten(s, "", flat);
  return flat;
}

// "/replicas/threads" -> "replicas.threads".
std::string dotted(const std::string& pointer) {
  std::string out = pointer.substr(1);
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}
}  // namespace

const std::map<std::string, std::string>& leaders() {
  static const std::map<std::string, std::string> map = [] {
    std::map<std::string, std::string> out;
    for (const config::SpecField& f : config::spec_fields())
      if (!f.follows.empty()) out.emplace(dotted(f.pointer), dotted(f.follows));
    return out;
  }();
  return map;
}

int64_t seed_of(const RunData& r) { return r.spec.is_object() ? int_field(r.spec, "seed", 0) : 0; }

std::string value_text(const json& v) {
  if (v.is_null()) return "(unset)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

json setting_value(const GroupStats& g, const Setting& s) {
  if (s.keys.size() == 1) return g.key_spec.value(s.keys.front(), json());
  json out = json::array();
  for (const auto& k : s.keys) out.push_back(g.key_spec.value(k, json()));
  return out;
}

std::string setting_text(const GroupStats& g, const Setting& s) {
  std::vector<std::string> parts;
  for (const auto& k : s.keys) parts.push_back(value_text(g.key_spec.value(k, json())));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<json> group_runs(ReportData& data) {
  std::vector<json> keys;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    RunData& run = data.runs[i];
    json key = run.spec.is_null() ? json{{"run", run.dir.string()}} : group_key(run.spec);
    auto it = std::find(keys.begin(), keys.end(), key);
    run.group = static_cast<size_t>(it - keys.begin());
    if (it == keys.end()) {
      keys.push_back(key);
      data.groups.emplace_back();
      data.groups.back().key_spec = key;
    }
    data.groups[run.group].runs.push_back(i);
  }
  return keys;
}

std::vector<std::string> differing_keys(const std::vector<json>& keys) {
  std::set<std::string> all_keys;
  for (const auto& k : keys)
    for (auto it = k.begin(); it != k.end(); ++it) all_keys.insert(it.key());
  std::vector<std::string> out;
  for (const auto& name : all_keys) {
    for (const auto& k : keys) {
      if (k.value(name, json()) != keys.front().value(name, json())) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> following_keys(const std::vector<json>& keys, const std::vector<std::string>& differing) {
  std::vector<std::string> out;
  for (const auto& k : differing) {
    const auto f = leaders().find(k);
    if (f == leaders().end() || std::count(differing.begin(), differing.end(), f->second) == 0) continue;
    std::map<std::string, json> by_leader;
    bool function = true;
    for (const auto& g : keys) {
      const auto [it, added] = by_leader.emplace(g.value(f->second, json()).dump(), g.value(k, json()));
      if (!added && it->second != g.value(k, json())) function = false;
    }
    if (function) out.push_back(k);
  }
  return out;
}

std::vector<Setting> swept_settings(const std::vector<json>& keys, const std::vector<std::string>& differing,
                                    const std::vector<std::string>& followers) {
  std::vector<Setting> out;
  std::vector<std::vector<size_t>> splits;  // per setting: each group's first group with its value
  for (const auto& k : differing) {
    if (std::count(followers.begin(), followers.end(), k) > 0) continue;
    std::vector<size_t> split;
    for (const auto& g : keys) {
      const auto first = std::find_if(keys.begin(), keys.end(),
                                      [&](const json& h) { return h.value(k, json()) == g.value(k, json()); });
      split.push_back(static_cast<size_t>(first - keys.begin()));
    }
    const auto same = std::find(splits.begin(), splits.end(), split);
    if (same == splits.end()) {
      splits.push_back(split);
      out.push_back({k, {k}});
    } else {
      Setting& s = out[static_cast<size_t>(same - splits.begin())];
      s.name += " + " + k;
      s.keys.push_back(k);
    }
  }
  return out;
}

void label_group(const ReportData& data, const std::vector<std::string>& followers, GroupStats& g) {
  g.values = json::object();
  std::vector<std::string> set, unset;
  for (const auto& k : data.differing_keys) {
    const json v = g.key_spec.value(k, json());
    g.values[k] = v;
    if (std::count(followers.begin(), followers.end(), k) > 0) continue;
    (v.is_null() ? unset : set).push_back(fmt::format("{}={}", k, value_text(v)));
  }
  g.label = fmt::format("{}", fmt::join(set.empty() ? unset : set, ", "));
  if (g.label.empty()) g.label = data.title;
  if (g.key_spec.contains("run")) {
    const RunData& run = data.runs[g.runs.front()];
    g.label = fmt::format("{} (no {})", run.run_id, rundir::spec_file(run.dir).filename().string());
  }
}

void sort_groups(ReportData& data) {
  std::vector<size_t> order(data.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (const auto& k : data.differing_keys) {
      const json va = data.groups[a].values[k], vb = data.groups[b].values[k];
      if (va != vb) return va < vb;
    }
    return false;
  });
  std::vector<GroupStats> sorted;
  std::vector<size_t> new_index(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = i;
    sorted.push_back(std::move(data.groups[order[i]]));
  }
  data.groups = std::move(sorted);
  for (auto& r : data.runs) r.group = new_index[r.group];
}

std::vector<std::string> keys_between(const ReportData& data, const GroupStats& a, const GroupStats& b) {
  std::vector<std::string> out;
  for (const auto& k : data.differing_keys)
    if (a.key_spec.value(k, json()) != b.key_spec.value(k, json())) out.push_back(k);
  return out;
}

std::vector<std::string> follower_notes(const std::vector<std::string>& followers) {
  std::vector<std::string> out;
  for (const auto& k : followers) out.push_back(fmt::format("{} follows {}", k, leaders().at(k)));
  return out;
}

}  // namespace ddplab::report
