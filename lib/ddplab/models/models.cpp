#include "ddplab/models/models.h"

#include <fmt/format.h>
#include <torch/nn/module.h>

#include "ddplab/config/spec_error.h"

namespace ddplab::models {

// The registry: one line per model, X(<name>), each defined by DDPLAB_REGISTER_MODEL in
// lib/ddplab/models/<name>.cpp. CMakeLists.txt reads these lines (`  X(name)`, two spaces in) into
// the schema's model.name enum, in this order.
#define DDPLAB_FOR_EACH_MODEL(X) \
  X(mnist_cnn)                   \
  X(mlp)                         \
  X(cifar_tf_cnn)                \
  X(resnet20)                    \
  X(layers)                      \
  X(torchscript)

#define DDPLAB_DECLARE_MODEL(name) extern const ModelEntry DDPLAB_MODEL_ENTRY(name);
DDPLAB_FOR_EACH_MODEL(DDPLAB_DECLARE_MODEL)
#undef DDPLAB_DECLARE_MODEL

const std::vector<const ModelEntry*>& registered_models() {
#define DDPLAB_ADDRESS_OF_MODEL(name) &DDPLAB_MODEL_ENTRY(name),
  static const std::vector<const ModelEntry*> models{DDPLAB_FOR_EACH_MODEL(DDPLAB_ADDRESS_OF_MODEL)};
#undef DDPLAB_ADDRESS_OF_MODEL
  return models;
}

const ModelEntry& find_model(const std::string& name) {
  std::string expected;
  for (const ModelEntry* m : registered_models()) {
    if (name == m->name) return *m;
    expected += fmt::format("{}\"{}\"", expected.empty() ? "" : ", ", m->name);
  }
  throw config::spec_error("/model/name", fmt::format("must be one of {}, got \"{}\"", expected, name));
}

std::shared_ptr<Model> make_model(const ModelOptions& options, const InputShape& shape) {
  return find_model(options.name).make(options, shape);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelEntry* m : registered_models()) names.emplace_back(m->name);
  return names;
}

std::vector<std::string> model_names(bool has_batch_norm) {
  std::vector<std::string> names;
  for (const ModelEntry* m : registered_models())
    if (m->has_batch_norm == has_batch_norm) names.emplace_back(m->name);
  return names;
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace ddplab::models
