#include "ddplab/config/spec.h"

#include <type_traits>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/datasets.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// debug.fault: the faults it names, "none" left out.
std::vector<Fault> faults_of(const json& fault) {
  std::vector<Fault> faults;
  for (const std::string& name : fault_names(fault))
    if (const Fault f = parse_setting<Fault>(name, "/debug/fault"); f != Fault::kNone) faults.push_back(f);
  return faults;
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
  s.resolved = without_options_the_model_lacks(doc);  // their fields above keep the defaults, unused
  return s;
}

}  // namespace

ExperimentSpec resolve(nlohmann::json doc, const std::string& source) {
  if (!doc.is_object()) throw Error(source + ": the spec must be a JSON object, got " + doc.dump());
  precheck(doc, schema_doc(), "");
  infer_model_name(doc);
  const json given_model = doc.value("model", json::object());
  fill_defaults(doc, schema_doc());
  normalize_integers(doc, schema_doc());
  validate(doc);
  check_model_options(given_model);
  check_cross_fields(doc);
  return to_typed(fields_kept(std::move(doc), in_run_spec));
}

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides) {
  return resolve(load_document(path, overrides), path);
}

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

Error spec_error(std::string_view pointer, std::string_view what) {
  TORCH_INTERNAL_ASSERT(!pointer.empty() && pointer.front() == '/', "not a JSON pointer: ", pointer);
  return Error(fmt::format("{}: {}", pointer, what));
}

}  // namespace ddplab::config
