#include "ddplab/runtime/device.h"

#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"

#ifdef DDPLAB_WITH_CUDA
#include <cuda_runtime_api.h>

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab::runtime {

#ifdef DDPLAB_WITH_CUDA

void select_device(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::set_device(device.index());
}

void synchronize(const c10::Device& device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDAGuard guard(device.index());
  c10::cuda::device_synchronize();
}

struct BatchMover::Cuda {
  c10::cuda::CUDAStream copy_stream;
  at::cuda::CUDAEvent copied;

  explicit Cuda(c10::Device device) : copy_stream(c10::cuda::getStreamFromPool(false, device.index())) {}

  // The device tensors are allocated and written on the copy stream; hand_over() gives them to
  // the compute stream.
  void copy(const c10::Device& device, const at::Tensor& x, const at::Tensor& y, at::Tensor& x_out, at::Tensor& y_out) {
    c10::cuda::CUDAStreamGuard guard(copy_stream);
    x_out = x.to(device, /*non_blocking=*/x.is_pinned());
    y_out = y.to(device, /*non_blocking=*/y.is_pinned());
    copied.record(copy_stream);
  }

  void hand_over(const c10::Device& device, at::Tensor& x, at::Tensor& y) {
    auto compute = c10::cuda::getCurrentCUDAStream(device.index());
    copied.block(compute);
    x.record_stream(compute);
    y.record_stream(compute);
  }
};

struct StreamTimer::Cuda {
  struct Interval {
    at::cuda::CUDAEvent begin{cudaEventDefault};
    at::cuda::CUDAEvent end{cudaEventDefault};
  };
  std::vector<std::unique_ptr<Interval>> intervals;  // reused from one take_seconds() to the next
  size_t used = 0;

  explicit Cuda(c10::Device) {}
  void start(const c10::Device& device) {
    if (used == intervals.size()) intervals.push_back(std::make_unique<Interval>());
    intervals[used]->begin.record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  void stop(const c10::Device& device) {
    intervals[used++]->end.record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  double take_seconds() {
    if (used == 0) return 0;
    intervals[used - 1]->end.synchronize();  // one stream: the earlier ones are done too
    double ms = 0;
    for (size_t i = 0; i < used; ++i) ms += intervals[i]->begin.elapsed_time(intervals[i]->end);
    used = 0;
    return ms / 1000.0;
  }
};

struct HostReadback::Cuda {
  std::vector<at::cuda::CUDAEvent> copied;  // per slot

  explicit Cuda(int capacity) : copied(capacity) {}
  void copy(const c10::Device& device, const at::Tensor& values, at::Tensor& host, int slot) {
    if (!host.defined() || host.numel() != values.numel())
      host = at::empty({values.numel()}, values.options().device(c10::kCPU).pinned_memory(true));
    host.copy_(values, /*non_blocking=*/true);
    copied[slot].record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  void wait(int slot) { copied[slot].synchronize(); }
};

struct StepGraph::Cuda {
  c10::cuda::CUDAStream previous;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAGraph graph;

  explicit Cuda(c10::Device device)
      : previous(c10::cuda::getCurrentCUDAStream(device.index())),
        stream(c10::cuda::getStreamFromPool(false, device.index())) {
    at::cuda::CUDAEvent queued;
    queued.record(previous);
    queued.block(stream);
    c10::cuda::setCurrentCUDAStream(stream);
  }
  ~Cuda() {
    // The memory of the graph's outputs goes back to the allocator after this: nothing may still
    // run on it. A CUDA error here was reported where it happened.
    (void)cudaStreamSynchronize(stream.stream());
    c10::cuda::setCurrentCUDAStream(previous);
  }

  void capture(const std::function<std::vector<at::Tensor>()>& body, std::vector<at::Tensor>& outputs) {
    // As torch.cuda.graph does: the eager steps' cached blocks go back to the driver, so that the
    // graph's private pool does not find the device full (the allocator may not free during capture).
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    try {
      // Thread-local: the loader thread may pin host memory meanwhile, which a global capture forbids.
      graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      outputs = body();
      graph.capture_end();
    } catch (const std::exception& e) {
      // The stream must not stay capturing. The process cannot go on to run the step eagerly
      // either: LibTorch 2.11 leaves its generator and allocator in capture (only capture_end
      // resets them), so the run stops with CUDA's reason.
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream.stream(), &partial) == cudaSuccess && partial != nullptr)
        (void)cudaGraphDestroy(partial);
      (void)cudaGetLastError();
      const std::string what = message_of(e);
      throw Error(fmt::format("replicas.cuda_graph: CUDA could not capture the training step ({}); run without it",
                              what.substr(0, what.find('\n'))));
    }
  }
  void replay() { graph.replay(); }
};

#else  // A CPU-only LibTorch: the spec rejects device "cuda", so no CUDA device gets here.

void select_device(const c10::Device&) {}
void synchronize(const c10::Device&) {}

struct BatchMover::Cuda {
  explicit Cuda(c10::Device) { TORCH_INTERNAL_ASSERT(false, "BatchMover: this ddplab is built without CUDA"); }
  void copy(const c10::Device&, const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&) {}
  void hand_over(const c10::Device&, at::Tensor&, at::Tensor&) {}
};

struct StreamTimer::Cuda {
  explicit Cuda(c10::Device) { TORCH_INTERNAL_ASSERT(false, "StreamTimer: this ddplab is built without CUDA"); }
  void start(const c10::Device&) {}
  void stop(const c10::Device&) {}
  double take_seconds() { return 0; }
};

struct HostReadback::Cuda {
  explicit Cuda(int) { TORCH_INTERNAL_ASSERT(false, "HostReadback: this ddplab is built without CUDA"); }
  void copy(const c10::Device&, const at::Tensor&, at::Tensor&, int) {}
  void wait(int) {}
};

struct StepGraph::Cuda {
  explicit Cuda(c10::Device) { TORCH_INTERNAL_ASSERT(false, "StepGraph: this ddplab is built without CUDA"); }
  void capture(const std::function<std::vector<at::Tensor>()>&, std::vector<at::Tensor>&) {}
  void replay() {}
};

#endif

BatchMover::BatchMover(c10::Device device) : device_(device) {
  if (device_.is_cuda()) cuda_ = std::make_unique<Cuda>(device_);
}

BatchMover::~BatchMover() = default;

void BatchMover::stage(const at::Tensor& x, const at::Tensor& y) {
  TORCH_INTERNAL_ASSERT(!staged_, "BatchMover::stage: the previous batch was not taken");
  staged_ = true;
  if (cuda_) {
    cuda_->copy(device_, x, y, x_, y_);
  } else {
    x_ = x;
    y_ = y;
  }
}

std::pair<at::Tensor, at::Tensor> BatchMover::take() {
  TORCH_INTERNAL_ASSERT(staged_, "BatchMover::take: nothing staged");
  staged_ = false;
  if (cuda_) cuda_->hand_over(device_, x_, y_);
  return {std::move(x_), std::move(y_)};
}

StreamTimer::StreamTimer(c10::Device device) : device_(device) {
  if (device_.is_cuda()) cuda_ = std::make_unique<Cuda>(device_);
}

StreamTimer::~StreamTimer() = default;

void StreamTimer::start() {
  if (cuda_) {
    cuda_->start(device_);
  } else {
    start_ = std::chrono::steady_clock::now();
  }
}

void StreamTimer::stop() {
  if (cuda_) {
    cuda_->stop(device_);
  } else {
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
}

double StreamTimer::take_seconds() {
  if (cuda_) return cuda_->take_seconds();
  return std::exchange(seconds_, 0.0);
}

HostReadback::HostReadback(c10::Device device, int capacity) : device_(device), host_(capacity) {
  TORCH_INTERNAL_ASSERT(capacity > 0, "HostReadback needs at least one slot");
  if (device_.is_cuda()) cuda_ = std::make_unique<Cuda>(capacity);
}

HostReadback::~HostReadback() = default;

void HostReadback::push(const at::Tensor& values) {
  TORCH_INTERNAL_ASSERT(count_ < static_cast<int>(host_.size()), "HostReadback: ", count_, " values not popped yet");
  TORCH_INTERNAL_ASSERT(values.dim() == 1 && values.scalar_type() == c10::kDouble,
                        "HostReadback takes a 1-D float64 tensor, got ", values.sizes(), " ", values.scalar_type());
  const int slot = (head_ + count_) % static_cast<int>(host_.size());
  if (cuda_) {
    cuda_->copy(device_, values, host_[slot], slot);
  } else {
    host_[slot] = values.detach().to(c10::kCPU, c10::kDouble, /*non_blocking=*/false, /*copy=*/true);
  }
  ++count_;
}

std::vector<double> HostReadback::pop() {
  TORCH_INTERNAL_ASSERT(count_ > 0, "HostReadback::pop: nothing pushed");
  const int slot = head_;
  if (cuda_) cuda_->wait(slot);
  head_ = (head_ + 1) % static_cast<int>(host_.size());
  --count_;
  const double* v = host_[slot].const_data_ptr<double>();
  return {v, v + host_[slot].numel()};
}

StepGraph::StepGraph(c10::Device device) {
  if (device.is_cuda()) cuda_ = std::make_unique<Cuda>(device);
}

StepGraph::~StepGraph() = default;

std::vector<at::Tensor> StepGraph::capture(const std::function<std::vector<at::Tensor>()>& body) {
  TORCH_INTERNAL_ASSERT(cuda_ != nullptr && !captured_, "StepGraph::capture: no CUDA device, or captured already");
  std::vector<at::Tensor> outputs;
  cuda_->capture(body, outputs);
  captured_ = true;
  return outputs;
}

void StepGraph::replay() {
  TORCH_INTERNAL_ASSERT(captured_, "StepGraph::replay: nothing captured");
  cuda_->replay();
}

}  // namespace ddplab::runtime
