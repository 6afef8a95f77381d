// log.tensorboard: a run's event file, written in its run directory while the run trains, so that
// `tensorboard --logdir <output>` shows it (docs/tensorboard.md). Rank 0 writes it: the runner
// calls update() after every epoch record and finish() when the run ends.
//
// The file holds what the export (export.h) writes for the run, from the same code (run_events.h):
// the scalars of epochs.jsonl and steps.jsonl at step = samples seen, in the same order; the
// HParams session is the run's own (live_session), as a live run does not know its sweep's other
// runs. Each update() reads the run's records again and appends, in one write, the scalars of
// each tag beyond the last step it wrote: reading is cheaper than it sounds (a few KB per epoch)
// and leaves the records in one place.
//
// A resumed run's records after the checkpoint were dropped (rundir::RunLog::resume); the event
// file must drop them too. So the constructor always writes a new file whole from the records
// the directory holds (none when the run starts fresh) and then removes the directory's older
// event files: a fresh reader sees one curve, each step once. A resumed file begins with a
// SessionLog START at step 0, which makes a TensorBoard that read the old file before (its
// Python loader) forget those steps; the data server (tensorboard-data-server) forgets them
// because the new file's steps go back to 0.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "ddplab/rundir/run_data.h"
#include "ddplab/tensorboard/events.h"

namespace ddplab::tensorboard {

class LiveEventFile {
 public:
  // Writes <run_dir>/events.out.tfevents.<now>.<manifest host> (temp file + rename): file_version,
  // (when `resumed`) session_log_start_event at step 0, the session start, the scalars of the
  // records the directory holds. Then removes the directory's other events.out.tfevents.* files.
  // Throws ddplab::Error naming the file or directory.
  LiveEventFile(const std::filesystem::path& run_dir, bool resumed);
  // Appends the scalars of the records written since (one write). Throws ddplab::Error.
  void update();
  // update(), then the session's end with `status` at the current time.
  void finish(SessionStatus status);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::string new_scalars(const rundir::RunData& run);
  std::filesystem::path dir_, file_;
  double start_ = 0;                        // the manifest's start: the session's start time
  std::optional<double> clock_;             // its train_start, once written: wall times are it + wall_s
  std::map<std::string, int64_t> written_;  // tag -> the last step written
};

// The HParams session of a run that writes its own file: hparams = the settings its run id names
// (a sweep's run "replicas.count=2,schedule.scale_rule=linear,seed=3", config/sweep.h), with their
// values from spec.json, and "seed"; group_name = "<experiment>" followed by the run id's settings
// but the seed ("exp: replicas.count=2, schedule.scale_rule=linear"), so that a configuration's
// seeds form one session group.
SessionStart live_session(const rundir::RunData& run, double start);

}  // namespace ddplab::tensorboard
