#include "ddplab/distributed/comm.h"

#include <map>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#ifdef DDPLAB_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec_error.h"

namespace ddplab::distributed {

c10::intrusive_ptr<c10d::Store> host_store(const std::string& host, std::chrono::milliseconds timeout, int* port) {
  c10d::TCPStoreOptions opts;
  opts.port = 0;
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(host, opts);
  *port = store->getPort();
  return store;
}

std::shared_ptr<Comm> make_comm(const World& world, config::Backend backend, std::chrono::milliseconds timeout) {
  auto comm = std::make_shared<Comm>();
  comm->rank = world.rank;
  comm->size = world.size;
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(world.master_port);
  opts.isServer = !world.agent_store && world.rank == 0;
  opts.numWorkers = world.size;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, opts);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("rank {}: cannot reach the rendezvous store at {}:{}: {}", world.rank,
                                         world.master_addr, world.master_port, message_of(e)));
  }
  if (!world.store_prefix.empty()) store = c10::make_intrusive<c10d::PrefixStore>(world.store_prefix, store);
  comm->store = store;
  if (backend == config::Backend::kGloo) {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    std::string host = world.master_addr == "127.0.0.1" || world.master_addr == "localhost" ? "127.0.0.1" : "";
    options->devices.push_back(host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                            : c10d::ProcessGroupGloo::createDeviceForHostname(host));
    comm->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, world.rank, world.size, options);
  } else {
#ifdef DDPLAB_WITH_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    comm->device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, world.rank, world.size, options);
    nccl->setBoundDeviceId(comm->device);
    comm->backend = nccl;
#else
    throw config::spec_error("/replicas/backend",
                             "nccl: this ddplab was built without NCCL (no CUDA LibTorch, or no "
                             "nccl.h at build time); use \"gloo\", which also reduces CUDA tensors");
#endif
  }
  return comm;
}

namespace {

// Whether `t` must move for the backend: NCCL reduces tensors on its GPU only; gloo takes any.
bool must_move(const Comm& comm, const at::Tensor& t) { return comm.device.is_cuda() && t.device() != comm.device; }

// Runs `collective` on `t` where the backend can reach it, writing the result back into `t`.
template <typename F>
void on_comm_device(Comm& comm, at::Tensor& t, F collective) {
  if (!must_move(comm, t)) {
    collective(t);
    return;
  }
  auto moved = t.to(comm.device);
  collective(moved);
  t.copy_(moved);
}

void broadcast(Comm& comm, at::Tensor& t, int root) {
  on_comm_device(comm, t, [&](at::Tensor& x) {
    std::vector<at::Tensor> v{x};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    comm.backend->broadcast(v, opts)->wait();
  });
}

}  // namespace

int64_t ring_allreduce_bytes(int64_t payload_bytes, int world) {
  if (world <= 1) return 0;
  return 2 * (world - 1) * payload_bytes / world;
}

void allreduce_sum(Comm& comm, at::Tensor& t) {
  on_comm_device(comm, t, [&](at::Tensor& x) {
    std::vector<at::Tensor> v{x};
    comm.backend->allreduce(v)->wait();
  });
}

void allreduce_max(Comm& comm, at::Tensor& t) {
  on_comm_device(comm, t, [&](at::Tensor& x) {
    std::vector<at::Tensor> v{x};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    comm.backend->allreduce(v, opts)->wait();
  });
}

void broadcast_coalesced(Comm& comm, const std::vector<at::Tensor>& tensors, int root) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> flat_parts;
  for (const auto& t : tensors) flat_parts.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
  at::Tensor flat = torch::cat(flat_parts);
  broadcast(comm, flat, root);
  int64_t offset = 0;
  for (const auto& t : tensors) {
    auto part = flat.narrow(0, offset, t.numel()).view(t.sizes());
    t.detach().copy_(part);
    offset += t.numel();
  }
}

RepeatedBroadcast::RepeatedBroadcast(const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, group] : by_dtype) {
    int64_t numel = 0;
    for (const auto& t : group) numel += t.numel();
    Message m{torch::empty({numel}, group.front().options()), std::move(group), {}};
    int64_t offset = 0;
    for (const auto& t : m.tensors) {
      TORCH_INTERNAL_ASSERT(t.device() == m.flat.device(), "RepeatedBroadcast: tensors on ", t.device(), " and ",
                            m.flat.device());
      m.views.push_back(m.flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
    messages_.push_back(std::move(m));
  }
}

// Only the root's message needs packing and only the others' unpacking.
void RepeatedBroadcast::operator()(Comm& comm, int root) {
  torch::NoGradGuard no_grad;
  for (auto& m : messages_) {
    if (comm.rank == root) at::_foreach_copy_(m.views, m.tensors);
    broadcast(comm, m.flat, root);
    if (comm.rank != root) at::_foreach_copy_(m.tensors, m.views);
  }
}

void barrier(Comm& comm) { comm.backend->barrier()->wait(); }

void shutdown(Comm& comm) { comm.backend->shutdown(); }

std::vector<at::Tensor> allgather(Comm& comm, const at::Tensor& t) {
  std::vector<std::vector<at::Tensor>> outputs(1);
  const auto input = must_move(comm, t) ? t.to(comm.device) : t;
  for (int r = 0; r < comm.size; ++r) outputs[0].push_back(torch::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  comm.backend->allgather(outputs, inputs)->wait();
  for (auto& o : outputs[0]) o = o.to(t.device());
  return outputs[0];
}

}  // namespace ddplab::distributed
