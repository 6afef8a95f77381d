// What one replica trains, built from the spec in one place: the image transform, the model, its
// parameters and buffers, and the optimizer. The Trainer builds its own with make_network, and
// check_setup (`ddplab run --dry-run`, the runner before a run directory is made) builds one on
// the CPU: the same code, so the checks they make cannot drift apart.
#pragma once
#include <memory>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/data/transform.h"
#include "ddplab/distributed/world.h"
#include "ddplab/models/models.h"
#include "ddplab/train/audits.h"

namespace ddplab::distributed {
struct Comm;
}

namespace ddplab::train {

struct Network {
  std::shared_ptr<const data::Transform> transform;  // the model's input: train and eval alike
  std::shared_ptr<models::Model> model;
  c10::Device device{c10::kCPU};    // where the model lives (place_on_device)
  NamedTensors named;               // the parameters, in registration (forward) order; a tensor
                                    // two names reach (tied weights) once, under its first
  std::vector<at::Tensor> params;   // the same tensors as `named`
  std::vector<at::Tensor> buffers;  // every module buffer (BatchNorm statistics and batch counts)
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  // The floating-point buffers (BatchNorm's running statistics, not its integer batch count):
  // what the weight EMA averages.
  std::vector<at::Tensor> floating_buffers() const;
};

// Builds the network of replica `rank` on the CPU. The model's weights are drawn from the spec's
// seed (the same on every rank; seed + rank under debug fault skip_broadcast). Throws
// ddplab::Error for what only building finds: a global batch larger than the training set, an
// augment crop larger than the images, a model that cannot take the images, local SGD/EASGD with
// a BatchNorm model or with parameters of more than one dtype, a weight_decay_groups entry that
// matches no parameter.
Network make_network(const config::ExperimentSpec& spec, const data::DatasetPair& data, int rank);

// The generator dropout draws from on `device`: the device's default one (Philox on CUDA), the
// CPU's on a CPU.
at::Generator dropout_generator(c10::Device device);

// replicas.device "cuda": moves the model to GPU world.local_rank (modulo the visible GPUs under
// gloo, which may share one; NCCL needs one GPU per rank) and makes it the current device.
// Parameters and buffers keep their identity (the optimizer's references stay valid). A spec
// error naming /replicas/device when the GPU is not there. Nothing on CPU.
void place_on_device(Network& network, const config::ExperimentSpec& spec, const distributed::World& world);

// Connects the replicas of `network`: the process group (`comm` when given, else made under
// replicas.backend; null with one process), rank 0's parameters and buffers broadcast to every rank
// (not under debug fault skip_broadcast, `broadcast` false), and under model.sync_bn SyncBatchNorm's
// all-reduce. Returns the process group.
std::shared_ptr<distributed::Comm> connect(Network& network, const config::ExperimentSpec& spec,
                                           const distributed::World& world, std::shared_ptr<distributed::Comm> comm,
                                           bool broadcast);

}  // namespace ddplab::train
