// The cross-field rules of the model section: model.name against model.layers and
// model.torchscript, and each model.layers entry's fields (spec_steps.h).
#include <algorithm>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

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

}  // namespace

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

void check_model_options(const json& model) {
  const std::vector<std::string> lacks = options_the_model_lacks(model);
  if (lacks.empty()) return;
  const std::string& key = lacks.front();
  const json& takes = schema_doc()["properties"]["model"]["properties"][key]["models"];
  std::string names;
  for (size_t i = 0; i < takes.size(); ++i)
    names += fmt::format("{}{}", i == 0 ? "" : i + 1 == takes.size() ? " and " : ", ", takes[i].get<std::string>());
  const json name = model.value("name", schema_doc()["properties"]["model"]["properties"]["name"]["default"]);
  throw Error(fmt::format("/model/{}: only {} {} it, and model.name is {}; leave it out, got {}", key, names,
                          takes.size() == 1 ? "uses" : "use", name.dump(), model[key].dump()));
}

}  // namespace ddplab::config
