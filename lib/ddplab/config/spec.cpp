#include "ddplab/config/spec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "ddplab/base/error.h"
#include "ddplab/base/version.h"
#include "ddplab/config/datasets.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/slurm.h"
#include "ddplab/config/spec_error.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

const json& schema_doc() {
  static const json doc = json::parse(ddplab::schema_json());
  return doc;
}

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

// A model given by model.layers or model.torchscript alone is named after it.
void infer_model_name(json& doc) {
  if (!doc.contains("model") || !doc["model"].is_object() || doc["model"].contains("name")) return;
  json& model = doc["model"];
  if (model.contains("layers")) model["name"] = "layers";
  if (model.contains("torchscript")) model["name"] = "torchscript";
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

// debug.fault's names: the one name, or the array's (validated by the schema).
std::vector<std::string> fault_names(const json& fault) {
  return fault.is_string() ? std::vector<std::string>{fault.get<std::string>()} : fault.get<std::vector<std::string>>();
}

// A fault aimed at a rank that does not exist would silently never happen.
void check_fault_rank(const json& doc, int64_t count) {
  const int64_t fault_rank = doc["debug"]["rank"].get<int64_t>();
  const bool one_process = doc["replicas"]["mode"] == "simulated";
  for (const std::string& fault : fault_names(doc["debug"]["fault"]))
    if ((fault == "crash" || fault == "throw" || fault == "stop") && fault_rank >= (one_process ? 1 : count))
      throw Error(fmt::format(
          "/debug/rank: must be < {} for fault \"{}\" (its default is 1), got {}",
          one_process ? "1 (simulated replicas run in one process)" : fmt::format("replicas.count ({})", count), fault,
          fault_rank));
}

// debug.fault: the faults it names, "none" left out.
std::vector<Fault> faults_of(const json& fault) {
  std::vector<Fault> faults;
  for (const std::string& name : fault_names(fault))
    if (const Fault f = parse_setting<Fault>(name, "/debug/fault"); f != Fault::kNone) faults.push_back(f);
  return faults;
}

// Resolves backend "auto" from the device, after checking the build has what each one needs.
void check_backend(json& replicas) {
  const std::string device = replicas["device"].get<std::string>();
  if (replicas["backend"] == "nccl" && !ddplab::built_with_cuda())
    throw Error(
        "/replicas/backend: nccl needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"nccl\"");
  if (device == "cuda" && !ddplab::built_with_cuda())
    throw Error(
        "/replicas/device: cuda needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"cuda\"");
  if (replicas["backend"] == "auto") replicas["backend"] = device == "cuda" ? "nccl" : "gloo";
  const std::string backend = replicas["backend"].get<std::string>();
  if (backend == "nccl" && device != "cuda")
    throw Error("/replicas/backend: nccl needs replicas.device \"cuda\", got device " + replicas["device"].dump());
  if (backend == "nccl" && !ddplab::built_with_nccl())
    throw Error(
        "/replicas/backend: nccl: this ddplab was built without NCCL (nccl.h was not found at build time; set "
        "NCCL_INCLUDE_DIR and rebuild), got \"nccl\"; \"gloo\" also reduces CUDA tensors");
}

// Fills an empty dataset root with the dataset's default location.
void check_dataset_root(json& dataset) {
  const std::string name = dataset["name"].get<std::string>();
  if (!dataset["root"].get<std::string>().empty()) return;
  if (name == "idx") throw Error("/dataset/root: dataset \"idx\" needs a root directory, got \"\"");
  dataset["root"] = default_root(parse_setting<DatasetName>(name, "/dataset/name"));
}

void check_weight_decay_groups(const json& groups) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string& pattern = groups[i]["match"].get_ref<const std::string&>();
    try {
      std::regex re(pattern);
    } catch (const std::regex_error& e) {
      throw Error(
          fmt::format("/optimizer/weight_decay_groups/{}/match: must be a valid regular expression ({}), "
                      "got {}",
                      i, e.what(), groups[i]["match"].dump()));
    }
  }
}

// What simulated replicas cannot do, and an EASGD alpha that would overshoot.
void check_sync(const json& doc, int64_t count) {
  const json& replicas = doc["replicas"];
  const bool simulated = replicas["mode"] == "simulated";
  const json& sync = replicas["sync"];
  if (simulated && sync.is_object())
    throw Error("/replicas/sync: simulated replicas (replicas.mode \"simulated\") support \"allreduce\" only, got " +
                sync.dump());
  if (simulated && doc["model"]["sync_bn"] == true)
    throw Error(
        "/model/sync_bn: simulated replicas (replicas.mode \"simulated\") compute one shard at a time and "
        "cannot share batch statistics across shards; use replicas.mode \"processes\", got true");
  if (sync.is_object() && doc["model"]["ema_decay"] != 0)
    throw Error(
        "/model/ema_decay: local SGD and EASGD evaluate the replicas' mean or the center variable; a weight "
        "EMA on top of that is not supported; use replicas.sync \"allreduce\", got " +
        doc["model"]["ema_decay"].dump());
  if (sync.is_object() && sync.contains("easgd")) {
    const double alpha = sync["easgd"]["alpha"].get<double>();
    if (alpha * static_cast<double>(count) > 1.0)
      throw Error(
          fmt::format("/replicas/sync/easgd/alpha: must be <= 1 / replicas.count ({}) so that the center "
                      "variable does not overshoot, got {}",
                      count, sync["easgd"]["alpha"].dump()));
  }
}

// PowerSGD sends fp32 factors between processes, and keeps state (error feedback, Q) from its
// start on that a bucket rebuild after the first step would throw away (PyTorch refuses the same).
void check_compression(const json& replicas) {
  if (replicas["compression"] != "powersgd") return;
  if (replicas["grad_dtype"] != "fp32")
    throw Error(
        "/replicas/grad_dtype: PowerSGD (replicas.compression \"powersgd\") sends its matrices in fp32; use "
        "grad_dtype \"fp32\", got " +
        replicas["grad_dtype"].dump());
  if (replicas["mode"] == "simulated")
    throw Error(
        "/replicas/compression: simulated replicas (replicas.mode \"simulated\") sum their gradients exactly; "
        "PowerSGD needs replicas.mode \"processes\", got \"powersgd\"");
  const json& p = replicas["powersgd"];
  if (p["start_iter"].get<int64_t>() < 2 && (p["error_feedback"] == true || p["warm_start"] == true))
    throw Error(
        "/replicas/powersgd/start_iter: must be >= 2 with error_feedback or warm_start (the gradient buckets are "
        "rebuilt after the first step, which would drop their state; PyTorch's PowerSGDState refuses it too), got " +
        p["start_iter"].dump());
}

// What a captured step cannot hold (train/graphed_step.h): collectives of 2+ replicas, autocast's
// cast cache, micro-batches, the weight EMA's update.
void check_cuda_graph(const json& doc, int64_t count) {
  if (doc["replicas"]["cuda_graph"] != true) return;
  std::vector<std::string> conflicts;
  if (count != 1) conflicts.push_back(fmt::format("replicas.count {}", count));
  if (doc["replicas"]["mode"] != "processes") conflicts.push_back("replicas.mode \"simulated\"");
  if (doc["replicas"]["sync"] != "allreduce") conflicts.push_back("replicas.sync " + doc["replicas"]["sync"].dump());
  if (doc["precision"] != "fp32") conflicts.push_back("precision " + doc["precision"].dump());
  if (doc["batch"]["accumulate_steps"] != 1)
    conflicts.push_back("batch.accumulate_steps " + doc["batch"]["accumulate_steps"].dump());
  if (doc["model"]["ema_decay"] != 0) conflicts.push_back("model.ema_decay " + doc["model"]["ema_decay"].dump());
  if (conflicts.empty()) return;
  std::string list;
  for (const auto& c : conflicts) list += (list.empty() ? "" : ", ") + c;
  throw Error(
      "/replicas/cuda_graph: a captured step takes one replica in one process, precision \"fp32\", "
      "batch.accumulate_steps 1, model.ema_decay 0 and replicas.sync \"allreduce\"; got true with " +
      list);
}

// Stopping early chooses on the validation split; without one there is nothing to choose on.
void check_early_stop(const json& doc) {
  if (doc["early_stop"]["patience"] != 0 && doc["dataset"]["validation"] == 0)
    throw Error(
        "/early_stop/patience: stopping early needs a validation split to choose on (dataset.validation, a "
        "fraction or a count of training samples), got patience " +
        doc["early_stop"]["patience"].dump() + " and no split");
}

// Batches made on the device look each byte up in a table (data/device_data.h): brightness,
// contrast and per-image statistics have no table.
void check_placement(const json& dataset) {
  if (dataset["placement"] == "device" && dataset["augment"] == "tf_tutorial")
    throw Error(
        "/dataset/placement: batches made on the device take dataset.augment \"none\" or \"standard\" "
        "(tf_tutorial's brightness, contrast and per-image standardization are made on the host); use "
        "\"host\" or \"auto\", got \"device\" with augment \"tf_tutorial\"");
}

// The fields each model.layers type takes (and needs, and their defaults); the schema checks
// their values. A pooling layer's stride defaults to its kernel.
struct LayerFields {
  const char* type;
  std::vector<const char*> required;
  std::vector<std::pair<const char*, json>> optional;
};

const std::vector<LayerFields>& layer_fields() {
  static const std::vector<LayerFields> fields{
      {"conv", {"channels", "kernel"}, {{"stride", 1}, {"padding", 0}}},
      {"batch_norm", {}, {}},
      {"relu", {}, {}},
      {"gelu", {}, {}},
      {"max_pool", {"kernel"}, {{"stride", nullptr}}},
      {"avg_pool", {"kernel"}, {{"stride", nullptr}}},
      {"dropout", {}, {{"p", 0.5}}},
      {"flatten", {}, {}},
      {"linear", {"features"}, {}},
      {"residual", {"channels"}, {{"stride", 1}}},
  };
  return fields;
}

// One model.layers entry: only its type's fields, the required ones given; defaults filled in.
void check_layer(json& layer, const std::string& pointer) {
  const std::string type = layer["type"].get<std::string>();
  const auto& all = layer_fields();
  const auto fields = std::find_if(all.begin(), all.end(), [&](const LayerFields& f) { return type == f.type; });
  TORCH_INTERNAL_ASSERT(fields != all.end(), "layer type not in layer_fields(): ", type);
  std::string takes;
  for (const char* k : fields->required) takes += fmt::format("{}{}", takes.empty() ? "" : ", ", k);
  for (const auto& [k, unused] : fields->optional) takes += fmt::format("{}{}", takes.empty() ? "" : ", ", k);
  for (const auto& item : layer.items()) {
    const std::string& key = item.key();  // a lambda may not capture a structured binding before C++20
    const bool known =
        key == "type" ||
        std::any_of(fields->required.begin(), fields->required.end(), [&](const char* k) { return key == k; }) ||
        std::any_of(fields->optional.begin(), fields->optional.end(), [&](const auto& k) { return key == k.first; });
    if (!known)
      throw Error(fmt::format("{}/{}: a {} layer takes {}, got {}", pointer, escape_token(key), type,
                              takes.empty() ? "no other fields" : takes, layer.dump()));
  }
  for (const char* k : fields->required)
    if (!layer.contains(k))
      throw Error(fmt::format("{}/{}: is required for a {} layer, got {}", pointer, k, type, layer.dump()));
  for (const auto& [k, value] : fields->optional)
    if (!layer.contains(k)) layer[k] = value.is_null() ? layer["kernel"] : value;
}

// model.name agrees with model.layers and model.torchscript (infer_model_name() filled it in
// when left out), a TorchScript module is not asked for sync_bn; each layer is checked and completed.
void check_model(json& model) {
  const std::string name = model["name"].get<std::string>();
  const bool layers = model.contains("layers");
  const bool script = !model["torchscript"].get<std::string>().empty();
  if (layers && script)
    throw Error("/model/torchscript: give model.layers or model.torchscript, not both, got " +
                model["torchscript"].dump());
  if (layers != (name == "layers"))
    throw Error(layers
                    ? "/model/name: must be \"layers\" (or left out) when model.layers is given, got \"" + name + "\""
                    : "/model/layers: model.name \"layers\" needs the list of layers, got none");
  if (script != (name == "torchscript"))
    throw Error(script ? "/model/name: must be \"torchscript\" (or left out) when model.torchscript is given, got \"" +
                             name + "\""
                       : "/model/torchscript: model.name \"torchscript\" needs the path of a saved module, got \"\"");
  if (script && model["sync_bn"] == true)
    throw Error(
        "/model/sync_bn: a TorchScript module (model.torchscript) keeps torch's own BatchNorm, whose batch "
        "statistics ddplab cannot share across replicas; use model.layers with a batch_norm layer, or false, got true");
  if (!layers) return;
  for (size_t i = 0; i < model["layers"].size(); ++i)
    check_layer(model["layers"][i], fmt::format("/model/layers/{}", i));
}

// Each replica's batch is split into accumulate_steps micro-batches of equal size.
void check_accumulate_steps(const json& batch, int64_t count) {
  const int64_t per_replica =
      batch.contains("per_replica") ? batch["per_replica"].get<int64_t>() : batch["global"].get<int64_t>() / count;
  const int64_t steps = batch["accumulate_steps"].get<int64_t>();
  if (per_replica % steps != 0)
    throw Error(
        fmt::format("/batch/accumulate_steps: must divide the per-replica batch ({}) into equal "
                    "micro-batches, got {}",
                    per_replica, batch["accumulate_steps"].dump()));
}

// Evaluation points fall on step records: with both cadences set, every point closes a record.
void check_eval_cadence(const json& log) {
  const int64_t every = log["every_steps"].get<int64_t>(), eval = log["eval_every_steps"].get<int64_t>();
  if (every > 0 && eval % every != 0)
    throw Error(fmt::format("/log/eval_every_steps: must be a multiple of log.every_steps ({}), got {}", every,
                            log["eval_every_steps"].dump()));
}

void check_cross_fields(json& doc) {
  const json& batch = doc["batch"];
  if (batch.contains("per_replica") && batch.contains("global"))
    throw Error(fmt::format(
        "/batch: give exactly one of per_replica and global, got both ({} and {}); an override "
        "of one keeps the other, so switch by replacing the section: 'batch={{\"global\":{}}}' "
        "or 'batch={{\"per_replica\":{}}}'",
        batch["per_replica"].dump(), batch["global"].dump(), batch["global"].dump(), batch["per_replica"].dump()));
  if (!batch.contains("per_replica") && !batch.contains("global"))
    throw Error("/batch: give exactly one of per_replica and global, got neither");
  json& replicas = doc["replicas"];
  const int64_t count = replicas["count"].get<int64_t>();
  check_fault_rank(doc, count);
  if (batch.contains("global") && batch["global"].get<int64_t>() % count != 0)
    throw Error(
        fmt::format("/batch/global: must be divisible by replicas.count ({}), got {}", count, batch["global"].dump()));
  check_accumulate_steps(batch, count);
  check_backend(replicas);
  check_dataset_root(doc["dataset"]);
  check_weight_decay_groups(doc["optimizer"]["weight_decay_groups"]);
  check_model(doc["model"]);
  check_sync(doc, count);
  check_compression(replicas);
  check_cuda_graph(doc, count);
  check_early_stop(doc);
  check_placement(doc["dataset"]);
  check_eval_cadence(doc["log"]);
  slurm_options(doc);  // throws on a bad value, so `validate` reports it as `run --launcher slurm` would
  if (replicas["threads"].get<int64_t>() == 0) {
    const auto cores = static_cast<int64_t>(std::thread::hardware_concurrency());
    replicas["threads"] = std::max<int64_t>(1, replicas["mode"] == "simulated" ? cores : cores / count);
  }
}

std::vector<LayerSpec> to_layers(const json& model) {
  std::vector<LayerSpec> layers;
  if (!model.contains("layers")) return layers;
  for (size_t i = 0; i < model["layers"].size(); ++i) {
    const json& l = model["layers"][i];
    LayerSpec layer;
    layer.type = parse_setting<LayerType>(l["type"].get<std::string>(), fmt::format("/model/layers/{}/type", i));
    layer.channels = l.value("channels", int64_t{0});
    layer.kernel = l.value("kernel", int64_t{0});
    layer.stride = l.value("stride", int64_t{0});
    layer.padding = l.value("padding", int64_t{0});
    layer.features = l.value("features", int64_t{0});
    layer.p = l.value("p", 0.0);
    layers.push_back(layer);
  }
  return layers;
}

SyncSpec to_sync(const json& sync) {
  SyncSpec s;
  if (sync.is_object() && sync.contains("local_sgd")) {
    s.method = SyncMethod::kLocalSgd;
    s.period = sync["local_sgd"]["period"].get<int64_t>();
    s.start_epoch = sync["local_sgd"]["start_epoch"].get<int64_t>();
  } else if (sync.is_object() && sync.contains("easgd")) {
    s.method = SyncMethod::kEasgd;
    s.period = sync["easgd"]["period"].get<int64_t>();
    s.alpha = sync["easgd"]["alpha"].get<double>();
  }
  return s;
}

// The field at `pointer` of a resolved document (every default filled in), enums parsed.
template <class T>
void read_field(const json& doc, const char* pointer, T& field) {
  const json& value = doc.at(json::json_pointer(pointer));
  if constexpr (std::is_enum_v<T>) {
    field = parse_setting<T>(value.get<std::string>(), pointer);
  } else {
    field = value.get<T>();
  }
}

ExperimentSpec to_typed(const json& doc) {
  ExperimentSpec s;
  for_each_field(s, [&](const char* pointer, auto& field) { read_field(doc, pointer, field); });
  const json& o = doc["optimizer"];
  for (const auto& g : o["weight_decay_groups"])
    s.optimizer.weight_decay_groups.push_back({g["match"].get<std::string>(), g["weight_decay"].get<double>()});
  s.optimizer.beta1 = o["betas"][0].get<double>();
  s.optimizer.beta2 = o["betas"][1].get<double>();
  s.model.layers = to_layers(doc["model"]);
  s.replicas.sync = to_sync(doc["replicas"]["sync"]);
  const json& b = doc["batch"];
  s.per_replica_batch =
      b.contains("per_replica") ? b["per_replica"].get<int64_t>() : b["global"].get<int64_t>() / s.replicas.count;
  s.global_batch = s.per_replica_batch * s.replicas.count;
  s.debug.faults = faults_of(doc["debug"]["fault"]);
  s.resolved = doc;
  return s;
}

// json::parse with a nesting limit (see kMaxJsonDepth in spec.h) that refuses a key given twice
// in one object: JSON parsers keep the last, so the first would be silently ignored.
json parse_bounded(const std::string& text, const std::string& source) {
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> frames;
  return json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) throw Error(fmt::format("{}: JSON nested deeper than {} levels", source, kMaxJsonDepth));
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      frames.push_back({event == E::object_start, {}, {}});
    } else if ((event == E::object_end || event == E::array_end) && !frames.empty()) {
      frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!frames.back().keys.insert(key).second) {
        std::string where;
        bool in_array = false;
        for (size_t i = 0; i + 1 < frames.size() && !in_array; ++i) {
          in_array = !frames[i].object;
          if (!in_array) where += "/" + escape_token(frames[i].last_key);
        }
        throw Error(source + ": key \"" + key + "\" appears twice in the object " + (in_array ? "under " : "at ") +
                    (where.empty() ? "/" : where) +
                    "; JSON keeps only the last, so the first would be silently ignored");
      }
      frames.back().last_key = key;
    }
    return true;
  });
}

// Whether nlohmann can write `text` as a JSON string (it throws on invalid UTF-8).
bool is_utf8(const std::string& text) {
  try {
    (void)json(text).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// apply_override's step from `node` (the value at dotted key `walked`) to its child `part`: a key of
// an object (made if missing), or an index of an existing array element (model.layers.1.channels).
json& override_child(json& node, const std::string& part, const std::string& walked, const std::string& assignment) {
  if (node.is_object()) return node[part];
  if (!node.is_array()) throw Error("override \"" + assignment + "\": \"" + walked + "\" is not an object");
  const bool digits = std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || part.size() > 9 || std::stoul(part) >= node.size())
    throw Error(fmt::format("override \"{}\": \"{}\" is a list of {} items; \"{}\" is not the index of one", assignment,
                            walked, node.size(), part));
  return node[std::stoul(part)];
}

}  // namespace

std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string json_message(const nlohmann::json::exception& e) {
  std::string what = e.what();
  size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

nlohmann::json load_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a spec file");
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such spec file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read spec file: {}", path, std::strerror(errno)));
  // Bounded: a spec is a few kilobytes; /dev/zero or a wrong file must not take all memory.
  constexpr size_t kMaxSpecBytes = 16 << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSpecBytes) throw Error(path + ": larger than 16 MiB; not a spec file");
  }
  if (in.bad()) throw Error(path + ": cannot read spec file");
  return parse_json_text(text, path);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  // nlohmann's parser stops at a NUL byte as at the end of the text; what follows would be lost.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(fmt::format("{}: a NUL byte at offset {}; a JSON text holds none", source, nul));
  try {
    return parse_bounded(text, source);
  } catch (const json::parse_error& e) {
    // e.byte counts characters read, 1-based; the culprit is the last one read.
    size_t at = e.byte == 0 ? 0 : std::min(e.byte - 1, text.size());
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
    size_t line_start = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
    size_t col = line_start == std::string::npos ? at + 1 : at - line_start;
    std::string what = e.what();
    size_t column_pos = what.find("column ");
    size_t colon = column_pos == std::string::npos ? std::string::npos : what.find(": ", column_pos);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw Error(fmt::format("{}:{}:{}: malformed JSON: {}", source, line, col, what));
  } catch (const json::exception& e) {
    // out_of_range 406 "number overflow parsing '1e999'": no position is known.
    throw Error(source + ": malformed JSON: " + json_message(e));
  }
}

void apply_override(nlohmann::json& doc, const std::string& assignment) {
  // A value or key that is not UTF-8 would make every later dump() (error messages, spec.json)
  // throw; nothing on a command line needs it.
  if (!is_utf8(assignment)) throw Error("override \"" + assignment + "\": not valid UTF-8");
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) throw Error("override \"" + assignment + "\": expected key.path=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (key.empty() || key.back() == '.' ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }))
    throw Error("override \"" + assignment + "\": empty key");
  json value;
  try {
    value = parse_bounded(text, "override \"" + assignment + "\"");
  } catch (const json::parse_error&) {
    value = text;  // bare words are strings: name=foo
  } catch (const json::exception& e) {
    throw Error("override \"" + assignment + "\": " + json_message(e));
  }
  if (doc.is_null()) doc = json::object();
  json* node = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    json& next = override_child(*node, parts[i], walked, assignment);
    walked += (walked.empty() ? "" : ".") + parts[i];
    if (next.is_null()) next = json::object();
    node = &next;
  }
  override_child(*node, parts.back(), walked, assignment) = std::move(value);
}

ExperimentSpec resolve(nlohmann::json doc, const std::string& source) {
  if (!doc.is_object()) throw Error(source + ": the spec must be a JSON object, got " + doc.dump());
  precheck(doc, schema_doc(), "");
  infer_model_name(doc);
  fill_defaults(doc, schema_doc());
  normalize_integers(doc, schema_doc());
  validate(doc);
  check_cross_fields(doc);
  for (const char* key : {"sweep", "sweep_zip", "repeats"}) doc.erase(key);
  return to_typed(doc);
}

nlohmann::json load_document(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = load_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  return doc;
}

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides) {
  return resolve(load_document(path, overrides), path);
}

const char* schema_text() { return ddplab::schema_json(); }

std::optional<int64_t> known_classes(DatasetName name) {
  const DatasetInfo& d = dataset_info(name);
  return d.official ? std::optional<int64_t>(d.classes) : std::nullopt;
}

std::optional<int64_t> known_test_samples(DatasetName name) {
  const DatasetInfo& d = dataset_info(name);
  return d.official ? std::optional<int64_t>(d.test_size) : std::nullopt;
}

std::optional<DatasetName> dataset_of(const nlohmann::json& name) {
  if (!name.is_string()) return std::nullopt;
  for (size_t i = 0; i < SettingNames<DatasetName>::names.size(); ++i)
    if (name.get<std::string>() == SettingNames<DatasetName>::names[i]) return static_cast<DatasetName>(i);
  return std::nullopt;
}

std::string default_root(DatasetName name) { return dataset_info(name).default_root; }

}  // namespace ddplab::config

namespace ddplab::config {

Error spec_error(std::string_view pointer, std::string_view what) {
  TORCH_INTERNAL_ASSERT(!pointer.empty() && pointer.front() == '/', "not a JSON pointer: ", pointer);
  return Error(fmt::format("{}: {}", pointer, what));
}

}  // namespace ddplab::config

namespace ddplab::config {

nlohmann::json with_defaults(nlohmann::json doc) {
  fill_defaults(doc, schema_doc());
  return doc;
}

nlohmann::json upgraded_spec(nlohmann::json spec_json) {
  const json::json_pointer order("/dataset/order");
  if (spec_json.contains("dataset") && spec_json["dataset"].is_object() && !spec_json.contains(order))
    spec_json[order] = name(DataOrder::kTorchSampler);
  return with_defaults(std::move(spec_json));
}

}  // namespace ddplab::config
