// A process group over c10d: a TCPStore for rendezvous and a ProcessGroupGloo backend (CPU and
// CUDA tensors) or, in CUDA builds, a ProcessGroupNCCL backend (CUDA tensors only).
//
// make_comm() connects rank `world.rank` of `world.size` and returns when every rank has
// joined (or throws after `timeout`). All collectives below are blocking wrappers over the
// c10d Work objects; they take tensors on any device and move them to `Comm::device` and back
// when the backend needs it (NCCL cannot reduce host tensors). GradReducer (grad_reducer.h) uses the
// asynchronous backend calls directly on its device buckets.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddplab/config/settings.h"
#include "ddplab/distributed/endpoint.h"
#include "ddplab/distributed/world.h"

namespace ddplab::distributed {

struct Comm {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  int rank = 0;
  int size = 1;
  c10::Device device{c10::kCPU};    // NCCL: its GPU, where tensors must live; gloo: cpu (takes any tensor)
  std::vector<Endpoint> endpoints;  // gloo: where this rank's devices listen (endpoint.h)
  // Every rank's host name and first endpoint address (gloo), in rank order: the manifest's
  // "ranks" and the peer a failure names.
  struct RankHost {
    std::string host, address;
  };
  std::vector<RankHost> hosts;
};

// The Gloo devices listen where choose_endpoints() says (GLOO_SOCKET_IFNAME, else the route to
// MASTER_ADDR), decided before the store is reached, so that a loopback trap fails at once.
// backend: gloo (CPU tensors; CUDA tensors too) or nccl (CUDA builds with NCCL only; rank r
// uses GPU world.local_rank, which must be the current device: runtime::select_device).
std::shared_ptr<Comm> make_comm(const World& world, config::Backend backend, std::chrono::milliseconds timeout);

// Hosts a TCPStore server on host:0 (a free port) for a launcher; returns it, port via getPort().
c10::intrusive_ptr<c10d::Store> host_store(const std::string& host, std::chrono::milliseconds timeout, int* port);

// A failed collective's message `what` (Gloo's or NCCL's) as a user reads it: this rank, its host
// and address, whether a peer timed out or failed, the peer by rank and host when `what` names its
// address, and what to check.
std::string describe_failure(const Comm& comm, const std::string& what);

// Bytes one rank sends in a bandwidth-optimal (ring) all-reduce of `payload_bytes` over `world`
// ranks: 2 (world - 1) / world x payload (reduce-scatter, then all-gather). 0 for one rank.
int64_t ring_allreduce_bytes(int64_t payload_bytes, int world);

void allreduce_sum(Comm& comm, at::Tensor& t);
void allreduce_max(Comm& comm, at::Tensor& t);
// Broadcasts every tensor from `root` in place (flattened into one message).
void broadcast_coalesced(Comm& comm, const std::vector<at::Tensor>& tensors, int root);

// broadcast_coalesced of the same tensors again and again (the BatchNorm buffers DDP broadcasts
// before every forward). The messages (one per dtype) and each tensor's view of its message are
// made once, so a broadcast dispatches a multi-tensor copy and a collective per dtype: one kernel
// per dtype on a GPU, however many tensors there are (on a CPU the copy still copies them one by
// one), where broadcast_coalesced dispatches about seven operators per tensor. The
// tensors are held, not copied, and updated in place (one that gets new storage still is); all on
// one device.
class RepeatedBroadcast {
 public:
  explicit RepeatedBroadcast(const std::vector<at::Tensor>& tensors);
  void operator()(Comm& comm, int root);

 private:
  struct Message {
    at::Tensor flat;
    std::vector<at::Tensor> tensors, views;
  };
  std::vector<Message> messages_;
};
void barrier(Comm& comm);
// Ends the process group after its last collective, as torch.distributed.destroy_process_group()
// does: NCCL flushes and frees its communicators (a ProcessGroupNCCL destroyed without it warns
// that peers may be left waiting). Nothing to do for gloo. Call it on the success path only.
void shutdown(Comm& comm);
// Every rank's `t` (same shape and dtype on all ranks), in rank order.
std::vector<at::Tensor> allgather(Comm& comm, const at::Tensor& t);

}  // namespace ddplab::distributed
