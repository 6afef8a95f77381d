// The console of a training process (a TrainObserver, observer.h):
//   - progress: on a terminal, rank 0's live line redrawn at most every half second; elsewhere
//     every rank's plain line every log.progress_s seconds (0: none) with its mean training loss;
//   - rank 0's line per epoch (unless quiet) and, under debug.audits "warn", each failed audit;
//   - rank 0's notes (what a run did that its spec does not say: the prewarm's time, dropout
//     streams restarted on a resume, an early stop, an optimizer state full of denormal floats on
//     a CPU), on stdout with the epoch lines.
// The launcher sends rank 0's stdout to the console and every rank's stderr to its log file, so
// a note reaches the console in a run of several processes as in one of a single process.
#pragma once
#include "ddplab/config/spec.h"
#include "ddplab/distributed/world.h"
#include "ddplab/train/observer.h"

namespace ddplab::train {

class Console : public TrainObserver {
 public:
  // `spec` must outlive the Console. `progress`: progress lines at all; `quiet`: no epoch lines.
  Console(const config::ExperimentSpec& spec, const distributed::World& world, bool progress, bool quiet);

  void on_step(const StepProgress& progress) override;
  void on_epoch(const rundir::EpochRecord& record) override;
  void on_note(const std::string& note) override;

 private:
  void clear_live_line() const;  // on a terminal, before a line that must not mix with it

  const config::ExperimentSpec& spec_;
  const int rank_, size_;
  const bool tty_;             // rank 0 on a terminal: the live line
  const bool plain_progress_;  // no terminal: plain lines
  const bool quiet_;
  int epoch_ = -1;          // of the last step seen
  double last_line_s_ = 0;  // epoch_elapsed_s of the last progress line
};

}  // namespace ddplab::train
