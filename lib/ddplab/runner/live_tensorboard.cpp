#include "ddplab/runner/live_tensorboard.h"

#include <exception>
#include <string>

#include "ddplab/runner/console.h"
#include "ddplab/tensorboard/export.h"
#include "ddplab/tensorboard/live.h"
#include "ddplab/train/console.h"
#include "ddplab/train/observer.h"

namespace ddplab::runner {
namespace {

// `file` may be reset when a write fails: the run trains on without it.
template <typename Write>
void write_or_stop(std::shared_ptr<tensorboard::LiveEventFile>& file, const Write& write) {
  if (!file) return;
  try {
    write(*file);
  } catch (const std::exception& e) {
    complain("ddplab: warning: log.tensorboard: {}; the event file is no longer written", e.what());
    file.reset();
  }
}

class EventFileObserver : public train::TrainObserver {
 public:
  EventFileObserver(std::shared_ptr<TrainObserver> console, std::shared_ptr<tensorboard::LiveEventFile>& file)
      : console_(std::move(console)), file_(file) {}
  void on_step(const train::StepProgress& progress) override { console_->on_step(progress); }
  void on_epoch(const rundir::EpochRecord& record) override {
    console_->on_epoch(record);
    write_or_stop(file_, [](tensorboard::LiveEventFile& f) { f.update(); });
  }
  void on_note(const std::string& note) override { console_->on_note(note); }

 private:
  std::shared_ptr<TrainObserver> console_;
  std::shared_ptr<tensorboard::LiveEventFile>& file_;  // LiveTensorBoard's, which outlives training
};

}  // namespace

LiveTensorBoard::LiveTensorBoard(const config::ExperimentSpec& spec, const distributed::World& world,
                                 train::ReplicaOptions& options) {
  if (!spec.log.tensorboard || world.rank != 0) return;
  file_ = std::make_shared<tensorboard::LiveEventFile>(options.run_dir, options.resume);
  auto console = std::make_shared<train::Console>(spec, world, options.progress, options.quiet);
  options.observer = std::make_shared<EventFileObserver>(std::move(console), file_);
}

void LiveTensorBoard::finish(rundir::RunStatus status) noexcept {
  write_or_stop(file_, [&](tensorboard::LiveEventFile& f) { f.finish(tensorboard::session_status(status)); });
}

}  // namespace ddplab::runner
