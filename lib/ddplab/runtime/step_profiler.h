// A trace of a window of training steps, recorded with LibTorch's profiler (Kineto: the recorder
// behind torch.profiler) and written as a Chrome trace: every ATen operator the host dispatched,
// with its thread and duration, and on a GPU every kernel, copy and memset with its stream (CUPTI).
// Perfetto (ui.perfetto.dev), chrome://tracing and TensorBoard's PyTorch profiler plugin open it;
// bench/step_profile.py summarises it per step (host time, operators, kernels, how busy the GPU
// was). Each step is a range named "ProfilerStep#<step>", as torch.profiler's step() names them.
//
// The window is steps [first_step, first_step + steps) of whatever the caller counts (the trainer:
// global steps). Nothing is recorded outside it, and outside it the profiler costs nothing.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>

namespace at {
class RecordFunction;
}

namespace ddplab::runtime {

class StepProfiler {
 public:
  // steps == 0: never records. `file` is written after the window's last step.
  StepProfiler(int64_t first_step, int64_t steps, c10::Device device, std::filesystem::path file);
  ~StepProfiler();  // stops a recording still running, writing nothing
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Around step `step`: begin_step starts the recording at the window's first step and opens the
  // step's range; end_step closes it and, after the window's last step, writes the file.
  void begin_step(int64_t step);
  void end_step(int64_t step);
  // At the end of the run: writes the steps recorded if it ended inside the window. Returns what
  // happened to the window, for a note ("wrote 20 steps to ...", "the run ended before step 500");
  // nullopt when there was no window or the file was already written.
  std::optional<std::string> finish();

 private:
  void start();
  void write();

  int64_t first_step_, end_step_;
  c10::Device device_;
  std::filesystem::path file_;
  bool recording_ = false, written_ = false;
  int64_t recorded_ = 0;
  std::unique_ptr<at::RecordFunction> range_;
};

}  // namespace ddplab::runtime
