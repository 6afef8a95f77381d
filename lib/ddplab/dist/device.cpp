#include "ddplab/dist/device.h"

#include <torch/torch.h>

#ifdef DDPLAB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace ddplab::dist {

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
  at::cuda::CUDAEvent begin{cudaEventDefault};
  at::cuda::CUDAEvent end{cudaEventDefault};

  explicit Cuda(c10::Device) {}
  void start(const c10::Device& device) { begin.record(c10::cuda::getCurrentCUDAStream(device.index())); }
  void stop(const c10::Device& device) { end.record(c10::cuda::getCurrentCUDAStream(device.index())); }
  double seconds() {
    end.synchronize();
    return begin.elapsed_time(end) / 1000.0;
  }
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
  double seconds() { return 0; }
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
    stop_ = std::chrono::steady_clock::now();
  }
}

double StreamTimer::seconds() const {
  if (cuda_) return cuda_->seconds();
  return std::chrono::duration<double>(stop_ - start_).count();
}

}  // namespace ddplab::dist
