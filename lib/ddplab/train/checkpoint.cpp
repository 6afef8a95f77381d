#include "ddplab/train/checkpoint.h"

#include <cstring>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::train {
namespace {

void write_scalar(torch::serialize::OutputArchive& a, const std::string& key, double v) {
  a.write(key, torch::tensor(v, torch::kFloat64));
}

double read_scalar(torch::serialize::InputArchive& a, const std::string& key) {
  at::Tensor t;
  a.read(key, t);
  return t.item<double>();
}

// For fields added after the first checkpoint format.
double read_scalar_or(torch::serialize::InputArchive& a, const std::string& key, double fallback) {
  at::Tensor t;
  return a.try_read(key, t) ? t.item<double>() : fallback;
}

// A list of tensors as `<key>_size` and a sub-archive `<key>` of "0", "1", ...; nothing when empty.
void write_tensor_list(torch::serialize::OutputArchive& a, const std::string& key,
                       const std::vector<at::Tensor>& list) {
  if (list.empty()) return;
  torch::serialize::OutputArchive sub;
  for (size_t i = 0; i < list.size(); ++i) sub.write(fmt::format("{}", i), list[i]);
  write_scalar(a, key + "_size", static_cast<double>(list.size()));
  a.write(key, sub);
}

// What write_tensor_list wrote; empty when the checkpoint has none (or predates the field).
std::vector<at::Tensor> read_tensor_list(torch::serialize::InputArchive& a, const std::string& key) {
  std::vector<at::Tensor> list;
  const auto size = static_cast<int64_t>(read_scalar_or(a, key + "_size", 0));
  if (size == 0) return list;
  torch::serialize::InputArchive sub;
  a.read(key, sub);
  for (int64_t i = 0; i < size; ++i) {
    at::Tensor t;
    sub.read(fmt::format("{}", i), t);
    list.push_back(t);
  }
  return list;
}

// Every top-level tensor of the archive, and every list write_tensor_list wrote (a sub-archive
// with a "<key>_size"); the Trainer's own keys among them are read by name, and ignored here.
PartState read_part_state(torch::serialize::InputArchive& archive) {
  PartState state;
  const auto keys = archive.keys();
  for (const auto& key : keys)
    if (at::Tensor t; archive.try_read(key, t)) state.set(key, t);
  for (const auto& key : keys)
    if (state.tensor(key + "_size").defined()) state.set(key, read_tensor_list(archive, key));
  return state;
}

// The model's and the optimizer's state as the sub-archives "model" and "optimizer".
void write_model_and_optimizer(torch::serialize::OutputArchive& archive, torch::nn::Module& model,
                               torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive model_archive, optimizer_archive;
  model.save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
}

void read_model_and_optimizer(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                              torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
  archive.read("optimizer", optimizer_archive);
  optimizer.load(optimizer_archive);
}

// Serialised to memory: LibTorch's file writer terminates the process when the disk fills (its
// destructor writes again after the failed write).
std::string bytes_of(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  return bytes;
}

// Where loaded tensors go: the model's device (without one LibTorch restores each tensor on the
// device it was saved from, rank 0's cuda:0, and Module::load then moves rank r's there).
c10::Device device_of(torch::nn::Module& model) {
  const auto params = model.parameters();
  return params.empty() ? c10::Device(c10::kCPU) : params.front().device();
}

}  // namespace

void PartState::set(const std::string& key, double value) { tensors_[key] = torch::tensor(value, torch::kFloat64); }

void PartState::set(const std::string& key, const at::Tensor& tensor) { tensors_[key] = tensor; }

void PartState::set(const std::string& key, std::vector<at::Tensor> list) {
  if (!list.empty()) lists_[key] = std::move(list);
}

double PartState::number(const std::string& key, double fallback) const {
  const at::Tensor t = tensor(key);
  return t.defined() ? t.item<double>() : fallback;
}

at::Tensor PartState::tensor(const std::string& key) const {
  const auto it = tensors_.find(key);
  return it == tensors_.end() ? at::Tensor() : it->second;
}

std::vector<at::Tensor> PartState::list(const std::string& key) const {
  const auto it = lists_.find(key);
  return it == lists_.end() ? std::vector<at::Tensor>{} : it->second;
}

const at::Tensor& own_entry(const std::filesystem::path& file, const std::vector<at::Tensor>& entries, const char* what,
                            int rank, int size) {
  if (static_cast<int>(entries.size()) != size)
    throw Error(fmt::format("{}: holds {}, this run has {} processes; `ddplab run --force` starts the run over",
                            file.string(), fmt::format(fmt::runtime(what), entries.size()), size));
  return entries[static_cast<size_t>(rank)];
}

at::Tensor replica_state_blob(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  write_model_and_optimizer(archive, model, optimizer);
  const std::string bytes = bytes_of(archive);
  auto blob = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(blob.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return blob;
}

std::vector<at::Tensor> gather_replica_states(distributed::Comm& comm, torch::nn::Module& model,
                                              torch::optim::Optimizer& optimizer) {
  return gather_blobs(comm, replica_state_blob(model, optimizer));
}

std::vector<at::Tensor> gather_blobs(distributed::Comm& comm, const at::Tensor& blob) {
  const auto sizes = distributed::allgather(comm, torch::tensor({blob.numel()}, torch::kInt64));
  int64_t longest = 0;
  for (const auto& n : sizes) longest = std::max(longest, n.item<int64_t>());
  auto padded = torch::zeros({longest}, torch::kUInt8);
  padded.narrow(0, 0, blob.numel()).copy_(blob);
  auto blobs = distributed::allgather(comm, padded);
  for (size_t r = 0; r < blobs.size(); ++r) blobs[r] = blobs[r].narrow(0, 0, sizes[r].item<int64_t>());
  return blobs;
}

void load_replica_state_blob(const at::Tensor& blob, torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  const at::Tensor bytes = blob.to(torch::kCPU).contiguous();
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()),
                    device_of(model));
  read_model_and_optimizer(archive, model, optimizer);
}

void save_module(const std::filesystem::path& file, torch::nn::Module& model) {
  torch::serialize::OutputArchive archive;
  model.save(archive);
  rundir::write_file_atomic(file, bytes_of(archive));
}

void save_checkpoint(const std::filesystem::path& file, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     const CheckpointState& s) {
  torch::serialize::OutputArchive archive, rng_archive;
  write_model_and_optimizer(archive, model, optimizer);
  write_scalar(archive, "epochs_done", static_cast<double>(s.epochs_done));
  write_scalar(archive, "step_in_epoch", static_cast<double>(s.step_in_epoch));
  write_scalar(archive, "global_step", static_cast<double>(s.global_step));
  write_scalar(archive, "records", static_cast<double>(s.records));
  write_scalar(archive, "wall_s", s.wall_s);
  write_scalar(archive, "loss_sum", s.loss_sum);
  write_scalar(archive, "correct", s.correct);
  write_scalar(archive, "grad_norm_sum", s.grad_norm_sum);
  write_scalar(archive, "comm_wait_s", s.comm_wait_s);
  write_scalar(archive, "epoch_elapsed_s", s.epoch_elapsed_s);
  write_scalar(archive, "ranks", static_cast<double>(s.rng_states.size()));
  for (size_t r = 0; r < s.rng_states.size(); ++r) rng_archive.write(fmt::format("{}", r), s.rng_states[r]);
  archive.write("rng", rng_archive);
  write_scalar(archive, "comm_bytes", static_cast<double>(s.comm_bytes));
  for (const auto& [key, tensor] : s.parts.tensors()) archive.write(key, tensor);
  for (const auto& [key, list] : s.parts.lists()) write_tensor_list(archive, key, list);
  rundir::write_file_atomic(file, bytes_of(archive));  // keeps the previous checkpoint until it is whole
}

CheckpointState load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer) {
  CheckpointState s;
  try {
    torch::serialize::InputArchive archive, rng_archive;
    archive.load_from(file.string(), device_of(model));
    read_model_and_optimizer(archive, model, optimizer);
    s.epochs_done = static_cast<int64_t>(read_scalar(archive, "epochs_done"));
    s.step_in_epoch = static_cast<int64_t>(read_scalar(archive, "step_in_epoch"));
    s.global_step = static_cast<int64_t>(read_scalar(archive, "global_step"));
    s.records = static_cast<int64_t>(read_scalar(archive, "records"));
    s.wall_s = read_scalar(archive, "wall_s");
    s.loss_sum = read_scalar(archive, "loss_sum");
    s.correct = read_scalar(archive, "correct");
    s.grad_norm_sum = read_scalar(archive, "grad_norm_sum");
    s.comm_wait_s = read_scalar(archive, "comm_wait_s");
    s.epoch_elapsed_s = read_scalar(archive, "epoch_elapsed_s");
    auto ranks = static_cast<int64_t>(read_scalar(archive, "ranks"));
    archive.read("rng", rng_archive);
    for (int64_t r = 0; r < ranks; ++r) {
      at::Tensor t;
      rng_archive.read(fmt::format("{}", r), t);
      s.rng_states.push_back(t.cpu());
    }
    s.comm_bytes = static_cast<int64_t>(read_scalar_or(archive, "comm_bytes", 0));
    s.parts = read_part_state(archive);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}: cannot resume from this checkpoint: {} (`ddplab run --force` starts the run over)",
                            file.string(), e.what_without_backtrace()));
  }
  return s;
}

}  // namespace ddplab::train
