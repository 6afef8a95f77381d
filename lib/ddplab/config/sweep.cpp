#include "ddplab/config/sweep.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (!key.empty() && key.back() == '.') parts.emplace_back();
  return parts;
}

// "optimizer.lr" -> "/optimizer/lr": where resolve() reports problems with that key.
std::string key_pointer(const std::string& dotted) {
  std::string out;
  for (const auto& part : split_dotted(dotted)) out += "/" + escape_token(part);
  return out;
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '=' || c == ',' || c == '+' || c == '-';
    out += ok ? c : '_';
  }
  for (size_t at = out.find(".."); at != std::string::npos; at = out.find("..", at)) out[at + 1] = '_';
  return out;
}

// A value as its run id shows it. Objects keep their words only: {"local_sgd":{"period":16}}
// becomes local_sgd_period_16, not a row of escaped braces and quotes; an array of strings joins
// them with '+' (debug.fault ["update_first_only","eval_first_half"]: update_first_only+eval_first_half).
std::string value_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && !value.empty() &&
      std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); })) {
    std::string out;
    for (const auto& v : value) out += (out.empty() ? "" : "+") + v.get<std::string>();
    return out;
  }
  if (!value.is_object()) return value.dump();
  std::string out;
  bool gap = false;
  for (char c : value.dump()) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
    if (!word) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += '_';
    out += c;
    gap = false;
  }
  return out;
}

struct Axis {
  std::string section;            // "sweep" or "sweep_zip"
  std::vector<std::string> keys;  // one key, or the zipped keys
  std::vector<const json*> arrays;
  size_t size = 0;
};

// The section's keys: those in `order` first (in that order), then the rest by name.
std::vector<std::string> ordered_keys(const json& section, const std::vector<std::string>& order) {
  std::vector<std::string> keys;
  for (const auto& k : order)
    if (section.contains(k) && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& [k, unused] : section.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

void check_entry(const std::string& section, const std::string& key, const json& values) {
  const std::string where = "/" + section + "/" + escape_token(key);
  auto parts = split_dotted(key);
  if (key.empty() || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }))
    throw Error(where + ": expected a dotted key such as \"optimizer.lr\", got \"" + key + "\"");
  std::string pointer;
  for (const auto& p : parts) pointer += "/" + escape_token(p);
  if (const SpecField* field = field_at(pointer); field != nullptr && !sweepable(field->role))
    throw Error(where +
                ": cannot be swept (name and output place the runs; sweep, sweep_zip and repeats are not settings)");
  if (!values.is_array() || values.empty())
    throw Error(where + ": must be a non-empty array of values, got " + values.dump());
  // In a zip a key may repeat a value (its partners differ); in a product it would repeat runs.
  for (size_t j = 1; section == "sweep" && j < values.size(); ++j)
    for (size_t i = 0; i < j; ++i)
      if (values[i] == values[j])
        throw Error(
            fmt::format("{}/{}: repeats value {}, {}; give each value once (`repeats` runs a point with "
                        "several seeds)",
                        where, j, i, values[j].dump()));
}

std::vector<Axis> make_axes(const json& doc, const std::vector<std::string>& order) {
  std::vector<Axis> axes;
  if (doc.contains("sweep")) {
    const json& sweep = doc["sweep"];
    if (!sweep.is_object())
      throw Error("/sweep: must be an object mapping dotted keys to arrays of values, got " + sweep.dump());
    for (const auto& key : ordered_keys(sweep, order)) {
      check_entry("sweep", key, sweep[key]);
      axes.push_back({"sweep", {key}, {&sweep[key]}, sweep[key].size()});
    }
  }
  if (doc.contains("sweep_zip")) {
    const json& zip = doc["sweep_zip"];
    if (!zip.is_object())
      throw Error("/sweep_zip: must be an object mapping dotted keys to arrays of values, got " + zip.dump());
    Axis axis{"sweep_zip", {}, {}, 0};
    for (const auto& key : ordered_keys(zip, order)) {
      check_entry("sweep_zip", key, zip[key]);
      if (doc.contains("sweep") && doc["sweep"].is_object() && doc["sweep"].contains(key))
        throw Error("/sweep_zip/" + escape_token(key) + ": is also in sweep; a key can be on one axis only");
      if (!axis.keys.empty() && zip[key].size() != axis.size)
        throw Error(fmt::format("/sweep_zip/{}: must have {} values like {}, got {}", escape_token(key), axis.size,
                                axis.keys.front(), zip[key].size()));
      axis.keys.push_back(key);
      axis.arrays.push_back(&zip[key]);
      axis.size = zip[key].size();
    }
    if (!axis.keys.empty()) axes.push_back(axis);
  }
  return axes;
}

int64_t repeats_of(const json& doc) {
  if (!doc.contains("repeats")) return 1;
  const json& r = doc["repeats"];
  // Compared as doubles: an unsigned value above INT64_MAX must not wrap to a negative count.
  if (!r.is_number_integer() || r.get<double>() < 1) throw Error("/repeats: must be an integer >= 1, got " + r.dump());
  if (r.get<double>() > static_cast<double>(kMaxSweepRuns))
    throw Error(
        fmt::format("/repeats: must be <= {} (the most runs a sweep may have), got {}", kMaxSweepRuns, r.dump()));
  return r.get<int64_t>();
}

// One applied sweep value: where resolve() would report it and where it came from.
struct Applied {
  std::string pointer;  // "/optimizer/lr"
  std::string entry;    // "/sweep/optimizer.lr/1"
};

// Names the sweep entry behind a resolve() error: the error is about the swept key or inside
// it ("/optimizer/lr: ..." -> "/sweep/optimizer.lr/1: ..."), or about a section the swept key
// lies in ("/epochs: ..." for "epochs.x" -> "/sweep/epochs.x/0: /epochs: ..."). "" when neither.
std::string blame(const std::string& message, const std::vector<Applied>& applied) {
  const Applied* best = nullptr;
  for (const auto& a : applied) {
    bool prefix = message.compare(0, a.pointer.size(), a.pointer) == 0 && message.size() > a.pointer.size() &&
                  (message[a.pointer.size()] == ':' || message[a.pointer.size()] == '/');
    if (prefix && (best == nullptr || a.pointer.size() > best->pointer.size())) best = &a;
  }
  if (best != nullptr) return best->entry + message.substr(best->pointer.size());
  const std::string culprit = message.substr(0, message.find(':'));
  if (culprit.empty() || culprit.front() != '/') return "";
  for (const auto& a : applied)
    if (a.pointer.compare(0, culprit.size() + 1, culprit + "/") == 0) return a.entry + ": " + message;
  return "";
}

// The number of runs: repeats times the size of every axis, refused beyond max_runs.
size_t run_count(const std::vector<Axis>& axes, int64_t repeats, size_t max_runs) {
  size_t total = static_cast<size_t>(repeats);  // <= kMaxSweepRuns, so the products cannot overflow
  for (const auto& axis : axes) {
    total *= axis.size;
    if (total > max_runs) break;
  }
  if (total > max_runs)
    throw Error(fmt::format("{}: expands to more than {} runs", axes.empty() ? "/repeats" : "/sweep", max_runs));
  return total;
}

// One point of the sweep before its repeats: the spec with that point's values applied.
struct Combo {
  json doc;
  ordered_json assignments;  // the swept values but the seed, in axis order
  std::vector<Applied> applied;
  std::string id;  // "optimizer.lr=0.1,": the run id up to its seed
};

// The point `index` picks on each axis.
Combo make_combo(const json& base, const std::vector<Axis>& axes, const std::vector<size_t>& index) {
  Combo combo{base, ordered_json::object(), {}, ""};
  for (size_t a = 0; a < axes.size(); ++a) {
    const Axis& axis = axes[a];
    for (size_t k = 0; k < axis.keys.size(); ++k) {
      const std::string& key = axis.keys[k];
      const json& value = (*axis.arrays[k])[index[a]];
      const std::string entry = fmt::format("/{}/{}/{}", axis.section, escape_token(key), index[a]);
      try {
        apply_override(combo.doc, key + "=" + value.dump());
      } catch (const Error& e) {
        throw Error(entry + ": " + e.what());
      }
      combo.applied.push_back({key_pointer(key), entry});
      if (key == "seed") continue;  // the seed is named last, after repeats
      combo.assignments[key] = value;
      combo.id += sanitize(key) + "=" + sanitize(value_text(value)) + ",";
    }
  }
  return combo;
}

// Repeat r of a point: its seed (or the schema's default) plus r.
json repeat_doc(const json& combo_doc, int64_t repeats, int64_t r) {
  json run_doc = combo_doc;
  if (repeats <= 1) return run_doc;
  const json& seed_schema = schema_doc()["properties"]["seed"];
  if (!run_doc.contains("seed")) run_doc["seed"] = seed_schema["default"];
  // Only a seed resolve() accepts counts up; that also keeps seed + r from overflowing. Any
  // other is left as it is for resolve() to report on the first repeat.
  const json& seed = run_doc["seed"];
  if (seed.is_number_integer() && seed.get<double>() >= 0 && seed.get<double>() <= seed_schema["maximum"].get<double>())
    run_doc["seed"] = seed.get<int64_t>() + r;
  return run_doc;
}

// resolve() on one run; its error names the sweep entry behind it, or the run, unless the spec
// without its sweep fails the same way.
ExperimentSpec resolve_run(const json& run_doc, const json& base, const std::string& source,
                           const std::vector<Applied>& applied, bool swept, const std::string& run_id) {
  try {
    return resolve(run_doc, source);
  } catch (const Error& e) {
    const std::string message = e.what();
    std::string named = blame(message, applied);
    if (!named.empty()) throw Error(named);
    if (!swept) throw;
    try {
      resolve(base, source);
    } catch (const Error& b) {
      if (message == b.what()) throw;  // the spec itself is wrong, not this run's values
    }
    throw Error(fmt::format("/sweep: run {}: {}", run_id, message));
  }
}

// Refuses a run id an earlier run has, or one too long for a directory name.
void check_run_id(const std::string& run_id, const ordered_json& values, const std::vector<SweepRun>& runs,
                  std::map<std::string, size_t>& seen) {
  auto [it, fresh] = seen.emplace(run_id, runs.size());
  if (!fresh)
    throw Error(
        fmt::format("/sweep: runs {} and {} get the same run id \"{}\" (run ids keep only [A-Za-z0-9._=,+-]; "
                    "give values that differ there)",
                    runs[it->second].assignments.dump(), values.dump(), run_id));
  if (run_id.size() > kMaxRunIdChars)
    throw Error(
        fmt::format("/sweep: run id \"{}...\" is {} characters, more than the {} a directory name may have; "
                    "sweep fewer keys in one spec",
                    run_id.substr(0, 60), run_id.size(), kMaxRunIdChars));
}

}  // namespace

void check_run_id_flag(const std::string& run_id) {
  const bool safe = !run_id.empty() && run_id.size() <= kMaxRunIdChars && run_id.find("..") == std::string::npos &&
                    run_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._=,+-") ==
                        std::string::npos;
  if (!safe)
    throw Error(
        fmt::format("--run-id: must be a directory name of [A-Za-z0-9._=,+-] without \"..\", at most {} "
                    "characters, got \"{}\"",
                    kMaxRunIdChars, run_id));
}

bool has_sweep(const nlohmann::json& doc) { return doc.is_object() && fields_kept(doc, in_run_spec) != doc; }

std::vector<SweepRun> expand_sweep(const nlohmann::json& doc, const std::string& source,
                                   const std::vector<std::string>& key_order, size_t max_runs) {
  if (!doc.is_object()) resolve(doc, source);  // throws: a spec must be an object
  const std::vector<Axis> axes = make_axes(doc, key_order);
  const int64_t repeats = repeats_of(doc);
  const json base = fields_kept(doc, in_run_spec);
  const size_t total = run_count(axes, repeats, max_runs);

  std::vector<SweepRun> runs;
  runs.reserve(total);
  std::map<std::string, size_t> seen;
  std::vector<size_t> index(axes.size(), 0);
  for (size_t c = 0; c < total / static_cast<size_t>(repeats); ++c) {
    const Combo combo = make_combo(base, axes, index);
    for (int64_t r = 0; r < repeats; ++r) {
      const json run_doc = repeat_doc(combo.doc, repeats, r);
      const std::string seed_text = run_doc.contains("seed") ? value_text(run_doc["seed"]) : "1";
      const std::string tried_id = combo.id + "seed=" + sanitize(seed_text);
      ExperimentSpec spec = resolve_run(run_doc, base, source, combo.applied, !axes.empty(), tried_id);
      spec.run_id = fmt::format("{}seed={}", combo.id, spec.seed);
      ordered_json values = combo.assignments;
      values["seed"] = spec.seed;
      check_run_id(spec.run_id, values, runs, seen);
      runs.push_back(SweepRun{spec.run_id, std::move(values), std::move(spec)});
    }
    for (size_t a = axes.size(); a-- > 0;) {
      if (++index[a] < axes[a].size) break;
      index[a] = 0;
    }
  }
  return runs;
}

std::vector<std::string> sweep_key_order(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream buffer;
  buffer << in.rdbuf();
  return sweep_key_order_of_text(buffer.str());
}

std::vector<std::string> sweep_key_order_of_text(const std::string& json_text) {
  ordered_json doc = ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> keys;
  if (!doc.is_object()) return keys;
  for (const char* section : {"sweep", "sweep_zip"}) {
    if (!doc.contains(section) || !doc[section].is_object()) continue;
    for (const auto& [key, unused] : doc[section].items()) keys.push_back(key);
  }
  return keys;
}

namespace {
// An override of a key that `sweep` or `sweep_zip` sets would change no run: each run takes the
// swept value. Refused, naming the override and the axis, rather than ignored.
void refuse_swept_overrides(const json& doc, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    for (const char* axis : {"sweep", "sweep_zip"})
      if (doc.contains(axis) && doc[axis].is_object() && doc[axis].contains(key))
        throw Error(
            fmt::format("override \"{}\": {} is swept (/{}/{}), so no run would take this value; override "
                        "{} itself ('{}={{\"{}\": [...]}}' replaces the whole axis) or drop the key from it",
                        o, key, axis, key, axis, axis, key));
  }
}
}  // namespace

Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides) {
  Sweep sweep;
  sweep.doc = load_document(path, overrides);
  refuse_swept_overrides(sweep.doc, overrides);
  sweep.runs = expand_sweep(sweep.doc, path, sweep_key_order(path));
  return sweep;
}

std::vector<std::string> resolved_differences(const nlohmann::json& base, const nlohmann::json& run) {
  std::vector<std::string> lines;
  for (const auto& op : json::diff(base, run)) {
    const std::string path = op["path"].get<std::string>();
    const std::string kind = op["op"].get<std::string>();
    if (kind == "replace")
      lines.push_back(path + ": " + base.at(json::json_pointer(path)).dump() + " -> " + op["value"].dump());
    else if (kind == "add")
      lines.push_back(path + ": added " + op["value"].dump());
    else if (kind == "remove")
      lines.push_back(path + ": removed");
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace ddplab::config
