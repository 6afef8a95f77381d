// The two exceptions that end training early without being failures: Diverged and Interrupted
// (runner/outcome.h maps them to a run's status and exit code). Apart from trainer.h so that
// what throws them (step_readback.h) need not include the Trainer's header.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ddplab::train {

// A NaN or Inf gradient (after the all-reduce, so every rank sees it at the same step) stops
// training: status "diverged", exit code 3. Under local SGD / EASGD a replica's gradient is its
// own: the rank that saw it tells the others at the next averaging point (or the epoch's end),
// where every rank throws. So does an epoch whose mean training loss has blown up
// (loss_has_blown_up, trainer.h) although it stayed finite; that epoch's record is written first.
class Diverged : public std::runtime_error {
 public:
  Diverged(const std::string& message, int epoch, int64_t step)
      : std::runtime_error(message), epoch(epoch), step(step) {}
  int epoch;
  int64_t step;
};

// SIGINT/SIGTERM while a StopSignals lives (base/stop_signals.h; `ddplab run` and a worker hold one
// with Second::kDefaultAction): every rank finishes the same step (agreed through GradReducer's
// control slot), then training stops: status "interrupted", exit code 128 + signal.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(const std::string& message, int signal) : std::runtime_error(message), signal(signal) {}
  int signal;
};

}  // namespace ddplab::train
