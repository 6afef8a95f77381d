// log.profile_steps (runtime/step_profiler.h) as a part: every process traces the window's steps
// into its own trace file; at the end rank 0 notes what became of the window.
#include <memory>

#include "ddplab/rundir/layout.h"
#include "ddplab/runtime/step_profiler.h"
#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/run_writer.h"

namespace ddplab::train {
namespace {

class ProfilerPart : public Part {
 public:
  explicit ProfilerPart(const PartContext& c)
      : writer_(c.writer),
        profiler_(c.spec.log.profile_from_step, c.spec.log.profile_steps, c.net.device,
                  rundir::profile_trace_file(c.writer.run_dir(), c.world.rank)) {}

  void begin_step(int64_t global_step) override { profiler_.begin_step(global_step); }
  void end_step(int64_t global_step) override { profiler_.end_step(global_step); }
  void end_run(int64_t /*epochs_done*/) override {
    if (const auto note = profiler_.finish()) writer_.note(*note);
  }

 private:
  RunWriter& writer_;
  runtime::StepProfiler profiler_;
};

std::unique_ptr<Part> make(const PartContext& c) {
  if (c.spec.log.profile_steps == 0) return nullptr;
  return std::make_unique<ProfilerPart>(c);
}

}  // namespace

DDPLAB_REGISTER_PART(profiler, &make);

}  // namespace ddplab::train
