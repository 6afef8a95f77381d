// The model registry. Every model maps a float image batch [B, C, H, W] to logits [B, classes].
// Each model is its own lib/ddplab/models/<name>.cpp, which documents it and defines its entry
// (DDPLAB_REGISTER_MODEL below); models.cpp lists the entries, one line each. That list is the
// schema's `model.name` enum too: CMakeLists.txt writes it into the schema compiled into the
// binary, so a new model is its file, its line and its test. Today: mnist_cnn, mlp, cifar_tf_cnn,
// resnet20, and the user's own: layers (a list in the spec, layers.cpp) and torchscript (a module
// saved from Python, torchscript.cpp) (docs/models.md).
//
// Parameters are registered in forward order; the gradient buckets (distributed/grad_reducer.h) take
// them in reverse. The model keeps no link to the process group: for model.sync_bn the trainer
// hands it a ReplicaSum after construction (so models/ and distributed/ stay independent).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "ddplab/config/settings.h"
#include "ddplab/models/batch_norm.h"

namespace ddplab::models {

struct InputShape {
  int64_t channels = 1, height = 28, width = 28;
  int64_t classes = 10;
};

// One layer of model "layers" (layers.cpp; the spec's model.layers entry, its defaults filled in).
// Fields the type does not take are 0.
struct Layer {
  config::LayerType type = config::LayerType::kRelu;
  int64_t channels = 0;  // conv, residual: output channels
  int64_t kernel = 0;    // conv, max_pool, avg_pool: square kernel
  int64_t stride = 0;    // conv, residual, max_pool, avg_pool
  int64_t padding = 0;   // conv: zeros on each side
  int64_t features = 0;  // linear: output features
  double p = 0;          // dropout: probability
};

// Which model to build; the trainer fills it from the spec's `model` section (train/options.h).
// Defaults as the spec's.
struct ModelOptions {
  std::string name = "mnist_cnn";  // a registered model's name
  std::vector<Layer> layers;       // layers: the layers in forward order
  std::string torchscript;         // torchscript: the saved module's path
  double dropout = 0.5;            // mnist_cnn and mlp
  int64_t hidden = 128;            // mlp only
  bool sync_bn = false;            // BatchNorm statistics over all replicas (batch_norm.h)
};

class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The all-reduce (ReplicaSum, batch_norm.h) that synchronized BatchNorm layers (model.sync_bn)
  // use; shared with them. Set it before training; without it they act as one replica.
  void set_replica_sum(ReplicaSum sum) { *replica_sum_ = std::move(sum); }

 protected:
  std::shared_ptr<ReplicaSum> replica_sum_ = std::make_shared<ReplicaSum>();
};

// One registered model: what models/<name>.cpp defines with DDPLAB_REGISTER_MODEL.
struct ModelEntry {
  const char* name;         // the spec's model.name
  const char* description;  // one line: what the model is
  // BatchNorm running statistics (model.sync_bn applies; local SGD/EASGD refuse it). false for
  // layers and torchscript, whose buffers depend on what the user gives: the trainer checks the
  // built model's buffers.
  bool has_batch_norm;
  // Throws ddplab::Error when the model cannot take `shape`.
  std::shared_ptr<Model> (*make)(const ModelOptions& options, const InputShape& shape);
};

// Defines the entry of model `name` (an identifier: the spec's spelling) in namespace
// ddplab::models, once, in lib/ddplab/models/<name>.cpp:
//   DDPLAB_REGISTER_MODEL(mlp, "one hidden layer", /*has_batch_norm=*/false, &make);
// and models.cpp's DDPLAB_FOR_EACH_MODEL lists it: X(mlp).
#define DDPLAB_MODEL_ENTRY(name) model_entry_##name
#define DDPLAB_REGISTER_MODEL(name, description, has_batch_norm, make) \
  extern const ModelEntry DDPLAB_MODEL_ENTRY(name) { #name, description, has_batch_norm, make }

// Every registered model, in the registry's order (models.cpp; the schema's model.name enum).
const std::vector<const ModelEntry*>& registered_models();

// The entry named `name`; a spec error naming /model/name and the registered names otherwise.
const ModelEntry& find_model(const std::string& name);

// find_model(options.name).make(options, shape). Throws ddplab::Error when the name is unknown or
// the model cannot take `shape` (mnist_cnn: height and width divisible by 4).
std::shared_ptr<Model> make_model(const ModelOptions& options, const InputShape& shape);

// The registered names, in the registry's order; with `has_batch_norm`, only those with or without.
std::vector<std::string> model_names();
std::vector<std::string> model_names(bool has_batch_norm);

int64_t parameter_count(const torch::nn::Module& module);

}  // namespace ddplab::models
