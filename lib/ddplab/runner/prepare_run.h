// Preparing a run's directory, as `ddplab run` (run_one.h) and rank 0 of `ddplab worker` under
// torchrun or srun (worker.h) both do it: the data are read and the set-up checked
// (train::check_setup) before anything is written, so a missing or corrupt file, or a spec that
// does not fit the data or the model, is a ddplab::Error that leaves no run directory; then an
// unfinished run is continued from its checkpoint or a new run directory is made.
#pragma once
#include <string>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::runner {

// What prepare_run does with a run directory that holds a run already.
struct RunStart {
  // Continue an unfinished run with a checkpoint (rundir::RunLog::resume), its manifest's
  // "restarts" entry saying `resume_reason`; nothing when the directory holds no such run.
  bool resume = true;
  std::string resume_reason;
  // Otherwise a new run directory: `replace` empties one that holds records (rundir::RunLog::create's
  // overwrite; without it that is an Error), unless `keep_finished` and its run is finished (status
  // done or diverged), which is an Error naming DDPLAB_FORCE=1.
  bool replace = false;
  bool keep_finished = false;
};

struct PreparedRun {
  data::DatasetPair data;  // the spec's dataset, read once for the training
  rundir::RunLog log;      // the run directory, status running
  bool resumed = false;    // continues from its checkpoint
};

PreparedRun prepare_run(const config::ExperimentSpec& spec, const RunStart& start);

}  // namespace ddplab::runner
