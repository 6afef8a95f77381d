// log.every_steps' step records (step_recorder.h) as a part: an interval closes after the step's
// averaging and evaluation point (a collective when it closes); rank 0's records go to steps.jsonl
// before the epoch's record, at a clean stop, and when training fails (the steps read before it).
#include <memory>

#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/run_writer.h"
#include "ddplab/train/step_recorder.h"

namespace ddplab::train {
namespace {

class StepRecordsPart : public Part {
 public:
  explicit StepRecordsPart(const PartContext& c)
      : writer_(c.writer),
        recorder_(c.spec.log.step_record_every(), c.steps_per_epoch, c.spec.global_batch, c.comm, c.writer.lead(),
                  c.net.device) {}

  void start_epoch(int epoch, int64_t first_step, double loss_sum, double correct) override {
    recorder_.start_epoch(epoch, first_step, loss_sum, correct);
  }

  void after_step(const StepEnd& e) override {
    recorder_.after_step(e.step, e.global_steps, e.lr, e.elapsed_s, e.totals.loss_sum, e.totals.correct, e.point);
  }

  void at_stop(const StopPoint& s) override {
    recorder_.at_stop(s.step, s.global_steps, s.lr, s.elapsed_s, s.loss_sum, s.correct);
    writer_.append(recorder_.take());
  }

  void before_record(rundir::EpochRecord& /*rec*/) override { writer_.append(recorder_.take()); }
  void on_failure() override { writer_.append(recorder_.take()); }

 private:
  RunWriter& writer_;
  StepRecorder recorder_;
};

std::unique_ptr<Part> make(const PartContext& c) {
  if (c.spec.log.step_record_every() == 0) return nullptr;
  return std::make_unique<StepRecordsPart>(c);
}

}  // namespace

DDPLAB_REGISTER_PART(step_records, &make);

}  // namespace ddplab::train
