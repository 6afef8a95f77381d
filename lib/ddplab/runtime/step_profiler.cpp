#include "ddplab/runtime/step_profiler.h"

#include <set>
#include <system_error>
#include <utility>

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "ddplab/base/error.h"
#include "ddplab/runtime/device.h"

namespace ddplab::runtime {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities(const c10::Device& device) {
  if (device.is_cuda()) return {ActivityType::CPU, ActivityType::CUDA};
  return {ActivityType::CPU};
}

}  // namespace

StepProfiler::StepProfiler(int64_t first_step, int64_t steps, c10::Device device, std::filesystem::path file)
    : first_step_(first_step), end_step_(first_step + steps), device_(device), file_(std::move(file)) {}

StepProfiler::~StepProfiler() {
  range_.reset();
  if (recording_) profiler::disableProfiler();
}

void StepProfiler::begin_step(int64_t step) {
  if (step < first_step_ || step >= end_step_ || written_) return;
  if (!recording_) start();
  range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  const std::string name = fmt::format("ProfilerStep#{}", step);
  range_->before(std::string_view(name), c10::ArrayRef<const c10::IValue>{});
}

void StepProfiler::end_step(int64_t step) {
  if (!range_) return;
  range_.reset();
  ++recorded_;
  if (step + 1 >= end_step_) write();
}

std::optional<std::string> StepProfiler::finish() {
  if (written_ || end_step_ == first_step_) return std::nullopt;
  if (!recording_)
    return fmt::format("log.profile_steps: no trace; the run took no step in [{}, {})", first_step_, end_step_);
  write();
  return fmt::format("log.profile_steps: the run ended inside the window; {} steps traced in {}", recorded_,
                     file_.string());
}

// Before the first step's range opens, so that Kineto's start (CUPTI's on a GPU) is outside it.
// Prepared here, not earlier: a prepared session that is never enabled confuses the next one.
void StepProfiler::start() {
  const ProfilerConfig config(ProfilerState::KINETO);
  try {
    profiler::prepareProfiler(config, activities(device_));
    profiler::enableProfiler(config, activities(device_));
  } catch (const c10::Error& e) {
    throw Error(fmt::format("log.profile_steps: LibTorch's profiler cannot record on {}: {}", device_.str(),
                            e.what_without_backtrace()));
  }
  recording_ = true;
}

// The device finishes the window's kernels first, so that the trace holds all of them. Written
// next to its final name and renamed, so a reader never sees half a trace.
void StepProfiler::write() {
  range_.reset();
  synchronize(device_);
  auto result = profiler::disableProfiler();
  recording_ = false;
  written_ = true;
  const auto part = std::filesystem::path(file_.string() + ".part");
  result->save(part.string());
  std::error_code ec;
  std::filesystem::rename(part, file_, ec);
  if (ec) throw Error(fmt::format("{}: cannot write the profile: {}", file_.string(), ec.message()));
}

}  // namespace ddplab::runtime
