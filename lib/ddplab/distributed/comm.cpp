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

namespace {

c10::intrusive_ptr<c10d::Store> connect_store(const World& world, std::chrono::milliseconds timeout) {
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
    throw std::runtime_error(fmt::format("rank {} on host {}: cannot reach the rendezvous store at {}:{}: {}",
                                         world.rank, host_name(), world.master_addr, world.master_port, message_of(e)));
  }
  if (!world.store_prefix.empty()) store = c10::make_intrusive<c10d::PrefixStore>(world.store_prefix, store);
  return store;
}

std::string host_key(int rank) { return fmt::format("ddplab/host/{}", rank); }

// Every rank leaves "<host> <address>" in the store; rank 0 reads them all once every rank has joined.
void publish_host(Comm& comm) {
  const std::string address = comm.endpoints.empty() ? "" : comm.endpoints.front().address;
  const std::string text = host_name() + " " + address;
  comm.store->set(host_key(comm.rank), std::vector<uint8_t>(text.begin(), text.end()));
}

void gather_hosts(Comm& comm) {
  for (int r = 0; r < comm.size; ++r) {
    auto bytes = comm.store->get(host_key(r));
    std::string text(bytes.begin(), bytes.end());
    size_t space = text.find(' ');
    comm.hosts.push_back({text.substr(0, space), space == std::string::npos ? "" : text.substr(space + 1)});
  }
}

c10::intrusive_ptr<c10d::Backend> make_gloo(const Comm& comm, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  for (const auto& e : comm.endpoints)
    options->devices.push_back(e.interface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(e.address)
                                                   : c10d::ProcessGroupGloo::createDeviceForInterface(e.interface));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(comm.store, comm.rank, comm.size, options);
}

}  // namespace

std::shared_ptr<Comm> make_comm(const World& world, config::Backend backend, std::chrono::milliseconds timeout) {
  auto comm = std::make_shared<Comm>();
  comm->rank = world.rank;
  comm->size = world.size;
  if (backend == config::Backend::kGloo)
    comm->endpoints = choose_endpoints(world.master_addr, process_environment(), world.rank);
  comm->store = connect_store(world, timeout);
  publish_host(*comm);
  if (backend == config::Backend::kGloo) {
    comm->backend = make_gloo(*comm, timeout);
  } else {
#ifdef DDPLAB_WITH_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    comm->device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(comm->store, world.rank, world.size, options);
    nccl->setBoundDeviceId(comm->device);
    comm->backend = nccl;
#else
    throw config::spec_error("/replicas/backend",
                             "nccl: this ddplab was built without NCCL (no CUDA LibTorch, or no "
                             "nccl.h at build time); use \"gloo\", which also reduces CUDA tensors");
#endif
  }
  gather_hosts(*comm);
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

std::string describe_failure(const Comm& comm, const std::string& what) {
  const auto& self = comm.hosts.empty() ? Comm::RankHost{host_name(), ""} : comm.hosts[static_cast<size_t>(comm.rank)];
  std::string peer;
  for (size_t r = 0; r < comm.hosts.size(); ++r) {
    const auto& h = comm.hosts[r];
    if (static_cast<int>(r) != comm.rank && !h.address.empty() && what.find("[" + h.address + "]") != std::string::npos)
      peer = fmt::format("; the peer is rank {} on host {} ({})", r, h.host, h.address);
  }
  const bool timed_out = what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos;
  return fmt::format(
      "rank {} on host {} ({}): {} in a collective{}: {}. Check that every host is up and reachable from the others "
      "(the other ranks' output says which failed first); the run directory keeps its last checkpoint",
      comm.rank, self.host, self.address, timed_out ? "no data from a peer within replicas.timeout_s" : "a peer failed",
      peer, what);
}

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
