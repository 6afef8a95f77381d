#include "ddplab/spec/spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "ddplab/error.h"
#include "ddplab/version.h"

namespace ddplab::spec {
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

// RFC 6901 escaping, so a key with '/' or '~' still yields a valid pointer.
std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

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

// Rejects the first key the schema does not know, before defaults hide typos.
void check_unknown_keys(const json& doc, const json& schema, const std::string& pointer) {
  if (doc.is_array() && schema.contains("items") && schema["items"].is_object()) {
    for (size_t i = 0; i < doc.size(); ++i) check_unknown_keys(doc[i], schema["items"], pointer + "/" + std::to_string(i));
    return;
  }
  if (!doc.is_object() || !schema.contains("properties")) return;
  const json& props = schema["properties"];
  bool closed = schema.value("additionalProperties", true) == false;
  for (const auto& [key, value] : doc.items()) {
    std::string child = pointer + "/" + escape_token(key);
    if (props.contains(key)) {
      check_unknown_keys(value, props[key], child);
      continue;
    }
    if (!closed) continue;
    std::string best;
    size_t best_distance = 4;
    std::string allowed;
    for (const auto& [known, unused] : props.items()) {
      size_t d = levenshtein(key, known);
      if (d < best_distance) best_distance = d, best = known;
      allowed += (allowed.empty() ? "" : ", ") + known;
    }
    if (!best.empty()) throw Error(child + ": unknown key; did you mean \"" + best + "\"?");
    throw Error(child + ": unknown key; allowed keys: " + allowed);
  }
}

void fill_defaults(json& doc, const json& schema) {
  if (!doc.is_object() || !schema.contains("properties")) return;
  for (const auto& [key, sub] : schema["properties"].items()) {
    if (!doc.contains(key) && sub.contains("default")) doc[key] = sub["default"];
    if (doc.contains(key)) fill_defaults(doc[key], sub);
  }
}

std::string number_text(const json& n) { return n.dump(); }

bool is_integer(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
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
  if (value != nullptr && schema != nullptr) {
    if (value->is_object() && schema->contains("required")) {
      for (const auto& key : (*schema)["required"])
        if (!value->contains(key.get<std::string>())) return pointer + "/" + key.get<std::string>() + ": is required";
    }
    std::string what = expectation(*value, *schema);
    if (!what.empty()) return pointer + ": " + what + ", got " + value->dump();
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

void check_cross_fields(json& doc) {
  const json& batch = doc["batch"];
  if (batch.contains("per_replica") == batch.contains("global"))
    throw Error("/batch: give exactly one of per_replica and global");
  json& replicas = doc["replicas"];
  int64_t count = replicas["count"].get<int64_t>();
  if (batch.contains("global") && batch["global"].get<int64_t>() % count != 0)
    throw Error("/batch/global: must be divisible by replicas.count (" + std::to_string(count) + "), got " +
                batch["global"].dump());
  const std::string backend = replicas["backend"].get<std::string>();
  const std::string device = replicas["device"].get<std::string>();
  if (backend == "nccl" && !ddplab::built_with_cuda())
    throw Error("/replicas/backend: nccl needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"nccl\"");
  if (backend == "nccl" && device != "cuda")
    throw Error("/replicas/backend: nccl needs replicas.device \"cuda\", got device " + replicas["device"].dump());
  if (device == "cuda" && !ddplab::built_with_cuda())
    throw Error("/replicas/device: cuda needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"cuda\"");

  json& dataset = doc["dataset"];
  const std::string name = dataset["name"].get<std::string>();
  if (dataset["root"].get<std::string>().empty()) {
    if (name == "idx") throw Error("/dataset/root: dataset \"idx\" needs a root directory, got \"\"");
    // The same table as data::default_root() (spec/ does not depend on data/; a test keeps them equal).
    dataset["root"] = name == "mnist"      ? "data/mnist"
                      : name == "cifar10"  ? "data/cifar-10-batches-bin"
                      : name == "cifar100" ? "data/cifar-100-binary"
                                           : "/usr/share/datasets/fashion-mnist";
  }
  const json& groups = doc["optimizer"]["weight_decay_groups"];
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string& pattern = groups[i]["match"].get_ref<const std::string&>();
    try {
      std::regex re(pattern);
    } catch (const std::regex_error& e) {
      throw Error("/optimizer/weight_decay_groups/" + std::to_string(i) + "/match: must be a valid regular expression (" +
                  e.what() + "), got " + groups[i]["match"].dump());
    }
  }
  if (replicas["threads"].get<int64_t>() == 0) {
    int64_t cores = static_cast<int64_t>(std::thread::hardware_concurrency());
    replicas["threads"] = std::max<int64_t>(1, cores / count);
  }
}

ExperimentSpec to_typed(const json& doc) {
  ExperimentSpec s;
  s.name = doc["name"].get<std::string>();
  const json& d = doc["dataset"];
  s.dataset.name = d["name"].get<std::string>();
  s.dataset.root = d["root"].get<std::string>();
  s.dataset.train_limit = d["train_limit"].get<int64_t>();
  s.dataset.test_limit = d["test_limit"].get<int64_t>();
  s.dataset.augment = d["augment"].get<std::string>();
  const json& m = doc["model"];
  s.model.name = m["name"].get<std::string>();
  s.model.dropout = m["dropout"].get<double>();
  s.model.hidden = m["hidden"].get<int64_t>();
  s.model.sync_bn = m["sync_bn"].get<bool>();
  const json& o = doc["optimizer"];
  s.optimizer.name = o["name"].get<std::string>();
  s.optimizer.lr = o["lr"].get<double>();
  s.optimizer.momentum = o["momentum"].get<double>();
  s.optimizer.nesterov = o["nesterov"].get<bool>();
  s.optimizer.weight_decay = o["weight_decay"].get<double>();
  for (const auto& g : o["weight_decay_groups"])
    s.optimizer.weight_decay_groups.push_back({g["match"].get<std::string>(), g["weight_decay"].get<double>()});
  s.optimizer.beta1 = o["betas"][0].get<double>();
  s.optimizer.beta2 = o["betas"][1].get<double>();
  s.optimizer.eps = o["eps"].get<double>();
  const json& c = doc["schedule"];
  s.schedule.scale_rule = c["scale_rule"].get<std::string>();
  s.schedule.base_batch = c["base_batch"].get<int64_t>();
  s.schedule.warmup_epochs = c["warmup_epochs"].get<double>();
  s.schedule.warmup_start_factor = c["warmup_start_factor"].get<double>();
  s.schedule.decay = c["decay"].get<std::string>();
  s.schedule.step_epochs = c["step_epochs"].get<double>();
  s.schedule.milestones = c["milestones"].get<std::vector<double>>();
  s.schedule.gamma = c["gamma"].get<double>();
  s.schedule.min_factor = c["min_factor"].get<double>();
  const json& r = doc["replicas"];
  s.replicas.count = r["count"].get<int>();
  s.replicas.device = r["device"].get<std::string>();
  s.replicas.backend = r["backend"].get<std::string>();
  s.replicas.reduce = r["reduce"].get<std::string>();
  s.replicas.bucket_mb = r["bucket_mb"].get<double>();
  s.replicas.threads = r["threads"].get<int>();
  s.replicas.timeout_s = r["timeout_s"].get<double>();
  s.replicas.max_restarts = r["max_restarts"].get<int>();
  const json& b = doc["batch"];
  s.per_replica_batch = b.contains("per_replica") ? b["per_replica"].get<int64_t>()
                                                  : b["global"].get<int64_t>() / s.replicas.count;
  s.global_batch = s.per_replica_batch * s.replicas.count;
  s.epochs = doc["epochs"].get<int>();
  s.seed = doc["seed"].get<int64_t>();
  s.output = doc["output"].get<std::string>();
  const json& g = doc["debug"];
  s.debug.fault = g["fault"].get<std::string>();
  s.debug.rank = g["rank"].get<int>();
  s.debug.step = g["step"].get<int64_t>();
  s.checkpoint.every_epochs = doc["checkpoint"]["every_epochs"].get<int>();
  s.resolved = doc;
  return s;
}

}  // namespace

nlohmann::json load_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read spec file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read spec file");
  const std::string text = buffer.str();
  try {
    return json::parse(text);
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
    throw Error(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": malformed JSON: " + what);
  }
}

void apply_override(nlohmann::json& doc, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos)
    throw Error("override \"" + assignment + "\": expected key.path=value");
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
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // bare words are strings: name=foo
  }
  if (doc.is_null()) doc = json::object();
  json* node = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node->is_object())
      throw Error("override \"" + assignment + "\": \"" + walked + "\" is not an object");
    walked += (walked.empty() ? "" : ".") + parts[i];
    json& next = (*node)[parts[i]];
    if (next.is_null()) next = json::object();
    node = &next;
  }
  if (!node->is_object())
    throw Error("override \"" + assignment + "\": \"" + walked + "\" is not an object");
  (*node)[parts.back()] = std::move(value);
}

ExperimentSpec resolve(nlohmann::json doc, const std::string& source) {
  if (!doc.is_object()) throw Error(source + ": the spec must be a JSON object, got " + doc.dump());
  check_unknown_keys(doc, schema_doc(), "");
  fill_defaults(doc, schema_doc());
  validate(doc);
  check_cross_fields(doc);
  for (const char* key : {"sweep", "sweep_zip", "repeats"}) doc.erase(key);
  return to_typed(doc);
}

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = load_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  return resolve(std::move(doc), path);
}

const char* schema_text() { return ddplab::schema_json(); }

}  // namespace ddplab::spec
