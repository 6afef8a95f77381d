// checkpoint.pt: everything needed to continue a run as if it had never stopped.
//
// Written by rank 0 every `checkpoint.every_epochs` epochs, at the end, and when a clean stop
// (SIGINT/SIGTERM) interrupts an epoch: model parameters and buffers, optimizer state (momentum,
// Adam moments), the position (epochs done, step within the epoch, global step), the partial
// metrics of an interrupted epoch, the number of records in epochs.jsonl, the CPU RNG state of
// every rank (dropout masks) and every rank's gradient compression state (PowerSGD). The data
// order needs no state: it is a function of (seed, epoch, step). Checkpoints written before a field existed load with
// its default. The file is written to a temp file beside it, fsynced, then renamed over checkpoint.pt, so the previous
// checkpoint stays whole until the new one is (a full disk throws ddplab::Error naming the file).
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "ddplab/distributed/comm.h"

namespace ddplab::train {

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
  // Gradient noise scale EMAs (train/noise_scale.h, raw state); 0 steps when none.
  double gns_trace = 0, gns_grad_sq = 0;
  int64_t gns_steps = 0;
  // EASGD's center variable (rank 0's, identical on every rank), one tensor per parameter; empty
  // for other syncs.
  std::vector<at::Tensor> easgd_center;
  // The weight EMA's averages (model.ema_decay, weight_ema.h), one per parameter; empty when off.
  std::vector<at::Tensor> weight_ema;
  // Its averages of the model's floating-point buffers (BatchNorm statistics); empty without.
  std::vector<at::Tensor> weight_ema_buffers;
  // Local SGD / EASGD with 2+ processes: each rank's own model and optimizer state
  // (replica_state_blob), index = rank; every rank resumes from its own. Empty otherwise (the
  // replicas are identical, rank 0's model and optimizer above are every rank's).
  std::vector<at::Tensor> replica_states;
  // GradReducer's rebuilt bucket layout (GradReducer::rebuilt_layout()); empty before the rebuild, for
  // one replica, and in checkpoints that predate it.
  std::vector<int64_t> bucket_layout;
  // The gradient comm hook's state (GradReducer::comm_hook_state(): PowerSGD's iteration, Q
  // matrices and error feedback), index = rank; empty for a hook that keeps none.
  std::vector<at::Tensor> comm_hook_states;
  // The best epoch so far on validation (train/early_stop.h) and its metric; 0: none yet.
  int64_t best_epoch = 0;
  double best_metric = 0;
};

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
