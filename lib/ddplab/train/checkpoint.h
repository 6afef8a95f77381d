// checkpoint.pt: everything needed to continue a run as if it had never stopped.
//
// Written by rank 0 every `checkpoint.every_epochs` epochs, at the end, and when a clean stop
// (SIGINT/SIGTERM) interrupts an epoch: model parameters and buffers, optimizer state (momentum,
// Adam moments), the position (epochs done, step within the epoch, global step), the partial
// metrics of an interrupted epoch, the number of records in epochs.jsonl, the CPU RNG state of
// every rank (dropout masks), and each stateful part's keys (train/part.h: the noise scale, the
// weight EMA, the EASGD center and local SGD's replicas, GradReducer's buckets and comm hook state,
// the best epoch). The data order needs no state: it is a function of (seed, epoch, step).
// Checkpoints written before a field existed load with its default. The file is written to a temp
// file beside it, fsynced, then renamed over checkpoint.pt, so the previous checkpoint stays whole
// until the new one is (a full disk throws ddplab::Error naming the file).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "ddplab/distributed/comm.h"

namespace ddplab::train {

// A part's state in a checkpoint (train/part.h), by key, as torch's Module::state_dict: numbers,
// tensors and lists of tensors, each written at the checkpoint's top level under its own key, so a
// key keeps its meaning across versions and a checkpoint without it loads with the fallback.
class PartState {
 public:
  void set(const std::string& key, double value);
  void set(const std::string& key, const at::Tensor& tensor);
  void set(const std::string& key, std::vector<at::Tensor> list);  // nothing is written for an empty list

  double number(const std::string& key, double fallback = 0) const;
  at::Tensor tensor(const std::string& key) const;             // undefined when absent
  std::vector<at::Tensor> list(const std::string& key) const;  // empty when absent

  const std::map<std::string, at::Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::vector<at::Tensor>>& lists() const { return lists_; }

 private:
  std::map<std::string, at::Tensor> tensors_;
  std::map<std::string, std::vector<at::Tensor>> lists_;
};

// What the Trainer itself checkpoints (the position and the partial metrics), and its parts' states.
struct CheckpointState {
  int64_t epochs_done = 0;    // completed epochs
  int64_t step_in_epoch = 0;  // steps done of epoch `epochs_done` (0 at an epoch boundary)
  int64_t global_step = 0;
  int64_t records = 0;  // lines of epochs.jsonl this checkpoint goes with
  double wall_s = 0;    // training wall time so far
  // Partial metrics of the interrupted epoch (zero at a boundary).
  double loss_sum = 0, correct = 0, grad_norm_sum = 0, comm_wait_s = 0, epoch_elapsed_s = 0;
  int64_t comm_bytes = 0;
  // Dropout generator state per replica (CPU, or the CUDA device's; the ranks', or the simulated
  // replicas').
  std::vector<at::Tensor> rng_states;
  // The parts' states (Part::save), each part's own keys.
  PartState parts;
};

// The entry of this rank (`rank` of `size`) in a part's per-rank list; an Error naming `file` when
// the list is not one entry per process. `what` names the list with a {} for its length.
const at::Tensor& own_entry(const std::filesystem::path& file, const std::vector<at::Tensor>& entries, const char* what,
                            int rank, int size);

// One replica's model and optimizer state, serialized as save_checkpoint writes rank 0's, in a
// uint8 tensor (on the CPU) that can be gathered to rank 0.
at::Tensor replica_state_blob(torch::nn::Module& model, torch::optim::Optimizer& optimizer);
// Every rank's `blob` (a 1-D uint8 tensor), index = rank, on every rank (a collective; blobs of
// unequal length are padded for the all-gather and cut back).
std::vector<at::Tensor> gather_blobs(distributed::Comm& comm, const at::Tensor& blob);
// Every rank's replica_state_blob (gather_blobs): what differs between the replicas of local
// SGD / EASGD, for CheckpointState::replica_states.
std::vector<at::Tensor> gather_replica_states(distributed::Comm& comm, torch::nn::Module& model,
                                              torch::optim::Optimizer& optimizer);

// Loads what replica_state_blob made into `model` and `optimizer` (tensors onto the model's device).
void load_replica_state_blob(const at::Tensor& blob, torch::nn::Module& model, torch::optim::Optimizer& optimizer);

// Writes `model` as torch::save(module) does (same format, the tensors on their devices), through
// a temp file and a rename.
void save_module(const std::filesystem::path& file, torch::nn::Module& model);

void save_checkpoint(const std::filesystem::path& file, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     const CheckpointState& state);

// Loads into `model` and `optimizer` (which must have the spec's architecture) and returns the
// state. Tensors land on the model's device, whatever device rank 0 saved them from (every rank
// of an N-GPU run loads rank 0's file); rng_states stay on the CPU, where generator states live.
// Throws ddplab::Error naming the file if it is unreadable or does not match the model.
CheckpointState load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer);

}  // namespace ddplab::train
