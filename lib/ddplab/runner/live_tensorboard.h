// log.tensorboard (docs/tensorboard.md): rank 0 writes the run's event file in its run directory
// while it trains (tensorboard/live.h). The Trainer is not told: the observer it reports to
// (train/observer.h) is its console with the event file's update after each epoch record.
#pragma once
#include <filesystem>
#include <memory>

#include "ddplab/config/spec.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/trainer.h"

namespace ddplab::tensorboard {
class LiveEventFile;
}

namespace ddplab::runner {

class LiveTensorBoard {
 public:
  // Nothing unless spec.log.tensorboard and `world` is rank 0. Otherwise starts the event file of
  // `options.run_dir` (LiveEventFile; `options.resume`: the run continues from its checkpoint) and
  // sets options.observer to the console that options.progress and options.quiet make, followed
  // by the file's update. Throws ddplab::Error when the file cannot be written. `spec` must
  // outlive this object.
  LiveTensorBoard(const config::ExperimentSpec& spec, const distributed::World& world, train::ReplicaOptions& options);
  LiveTensorBoard(const LiveTensorBoard&) = delete;  // the observer refers to file_
  LiveTensorBoard& operator=(const LiveTensorBoard&) = delete;
  // Writes the session's end with the run's `status` (tensorboard::session_status). A file that
  // cannot be written is a line on stderr, once, and is not written again; training goes on.
  void finish(rundir::RunStatus status) noexcept;

 private:
  std::shared_ptr<tensorboard::LiveEventFile> file_;
};

}  // namespace ddplab::runner
