// The device side of a rank: which GPU it owns, how host batches reach it, how time spent on it
// is measured, and how a step is captured in a CUDA graph. Everything CUDA-specific in ddplab
// lives in device.cpp, compiled with CUDA code only when LibTorch has CUDA (DDPLAB_WITH_CUDA); on
// CPU devices every piece here is a plain pass-through, so the trainer has one code path.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace ddplab::runtime {

// Makes `device` this process's current CUDA device (NCCL binds its communicator to it). No-op on CPU.
void select_device(const c10::Device& device);

// Waits for all work queued on `device` (torch.cuda.synchronize). No-op on CPU.
void synchronize(const c10::Device& device);

// Host -> device copies that overlap compute, as PyTorch's DataLoader(pin_memory=True) with
// .to(non_blocking=True) on a side stream does. stage() takes a batch in pinned host memory
// (the loader pins it on its own thread) and starts copying it on a copy stream; take() makes
// the current (compute) stream wait on an event recorded after that copy and returns the device
// tensors, marked as used by the compute stream so the caching allocator does not hand their
// memory out again while kernels still read them. The trainer stages batch k+1 before it queues
// step k, so the copy runs while step k computes. On CPU, stage/take pass the tensors through.
class BatchMover {
 public:
  explicit BatchMover(c10::Device device);
  ~BatchMover();
  BatchMover(const BatchMover&) = delete;
  BatchMover& operator=(const BatchMover&) = delete;

  void stage(const at::Tensor& x, const at::Tensor& y);
  bool staged() const { return staged_; }
  std::pair<at::Tensor, at::Tensor> take();

 private:
  struct Cuda;
  c10::Device device_;
  std::unique_ptr<Cuda> cuda_;
  at::Tensor x_, y_;
  bool staged_ = false;
};

// Total time of start()/stop() intervals on the current stream of `device`: CUDA events on GPUs
// (so an asynchronous wait, e.g. the compute stream blocked on an NCCL all-reduce, is measured
// where it happens, not on the host), a steady clock on CPU. start() and stop() never wait for
// the device, so a timer can bracket a wait in every step without a host sync per step;
// take_seconds() returns the sum of the intervals since its last call, waiting for the last
// stop event (call it where the host waits anyway: at the end of an epoch).
class StreamTimer {
 public:
  explicit StreamTimer(c10::Device device);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  void start();
  void stop();
  double take_seconds();

 private:
  struct Cuda;
  c10::Device device_;
  std::unique_ptr<Cuda> cuda_;
  std::chrono::steady_clock::time_point start_;
  double seconds_ = 0;
};

// Small per-step values (a 1-D float64 tensor of a few elements: a gradient norm, a stop flag)
// read on the host one step late, so that the host never waits for the device in the middle of
// a step. push() starts copying the values to pinned host memory behind the work already queued
// (non-blocking, an event recorded after it); pop() returns the oldest pushed values, waiting
// for that event only, so the step queued since keeps the GPU busy meanwhile. Synchronous on
// CPU. At most `capacity` pushes may be pending.
class HostReadback {
 public:
  explicit HostReadback(c10::Device device, int capacity = 2);
  ~HostReadback();
  HostReadback(const HostReadback&) = delete;
  HostReadback& operator=(const HostReadback&) = delete;

  void push(const at::Tensor& values);
  int pending() const { return count_; }
  std::vector<double> pop();

 private:
  struct Cuda;
  c10::Device device_;
  std::unique_ptr<Cuda> cuda_;
  std::vector<at::Tensor> host_;  // ring of `capacity` slots
  int head_ = 0, count_ = 0;
};

// A step captured once in a CUDA graph (at::cuda::CUDAGraph) and replayed, as torch.cuda.graph
// captures a network's whole step: the host then launches one graph per step instead of each of
// its kernels. A CUDA stream cannot be captured while it is the device's default stream, so from
// construction to destruction the calling thread's current stream on `device` is a stream of the
// graph's own: the eager steps before the capture, the capture, the replays and whatever is queued
// between them run there, in one order. It starts after the work queued on the previous stream,
// and the destructor waits for it and makes the previous stream current again.
// On a CPU (or a CPU build) nothing is captured: captures() is false and the caller runs its
// step eagerly.
class StepGraph {
 public:
  explicit StepGraph(c10::Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  bool captures() const { return cuda_ != nullptr; }
  bool captured() const { return captured_; }
  // Records the kernels `body` queues into the graph without running them (its host code runs
  // once) and returns what it returns: tensors in the graph's own memory, which every replay()
  // writes again. Once. Throws ddplab::Error with CUDA's message when a kernel of `body` cannot
  // be captured (a host sync inside it, a host-to-device copy from pageable memory, ...).
  std::vector<at::Tensor> capture(const std::function<std::vector<at::Tensor>()>& body);
  // Runs the captured kernels on the graph's stream.
  void replay();

 private:
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
  bool captured_ = false;
};

}  // namespace ddplab::runtime
