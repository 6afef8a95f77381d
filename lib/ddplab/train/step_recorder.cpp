#include "ddplab/train/step_recorder.h"

#include <torch/torch.h>

namespace ddplab::train {

StepRecorder::StepRecorder(int64_t every_steps, int64_t steps_per_epoch, int64_t global_batch,
                           std::shared_ptr<distributed::Comm> comm, bool lead, c10::Device device)
    : log_(every_steps, steps_per_epoch, global_batch), comm_(std::move(comm)), lead_(lead), readback_(device) {}

void StepRecorder::start_epoch(int epoch, int64_t first_step, double loss_sum, double correct) {
  log_.start_epoch(epoch, first_step, loss_sum, correct);
}

void StepRecorder::after_step(int64_t step, int64_t global_steps, double lr, double elapsed_s,
                              const at::Tensor& loss_sum, const at::Tensor& correct,
                              const std::optional<EvalPoint>& eval) {
  TORCH_INTERNAL_ASSERT(!eval || log_.closes_interval(step), "an evaluation point after step ", step,
                        " closes no step record");
  if (!log_.closes_interval(step)) return;
  auto sums = torch::stack({loss_sum, correct.to(torch::kFloat64)});
  if (comm_) distributed::allreduce_sum(*comm_, sums);
  if (!lead_) return;
  while (readback_.pending() > 0) read_oldest();
  readback_.push(sums);
  log_.close(step, global_steps, lr, elapsed_s, eval);
  if (log_.closes_epoch(step)) read_oldest();
}

void StepRecorder::at_stop(int64_t step, int64_t global_steps, double lr, double elapsed_s, double loss_sum,
                           double correct) {
  if (!lead_ || !log_.enabled()) return;
  while (readback_.pending() > 0) read_oldest();
  if (log_.closes_interval(step)) return;
  log_.close(step, global_steps, lr, elapsed_s);
  log_.read(loss_sum, correct);
}

void StepRecorder::read_oldest() {
  const auto sums = readback_.pop();
  log_.read(sums[0], sums[1]);
}

}  // namespace ddplab::train
