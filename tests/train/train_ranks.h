// The Trainer run in-process for the tests of train/: ranks as threads over Gloo
// (distributed/ranks.h), each with an observer that records what it hears, and the run
// directory's records read back.
#pragma once
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/observer.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"
#include "distributed/ranks.h"
#include "integration/integration_util.h"

namespace ddplab::train {

// Collects what a Trainer reports; thread-safe enough for one observer per rank.
class Recorder : public TrainObserver {
 public:
  void on_step(const StepProgress& p) override { steps.push_back({p.epoch, p.step}); }
  void on_epoch(const rundir::EpochRecord& record) override { epochs.push_back(record); }
  void on_note(const std::string& note) override { notes.push_back(note); }
  std::vector<std::pair<int, int64_t>> steps;
  std::vector<rundir::EpochRecord> epochs;
  std::vector<std::string> notes;
};

// What one in-process rank saw: its observer's reports and what it threw (null: it finished).
struct RankRun {
  std::shared_ptr<Recorder> recorder = std::make_shared<Recorder>();
  std::exception_ptr error;
};

// Trains `spec` on `ranks` in-process ranks (threads over Gloo), each with a Recorder; each rank's
// exception is kept, not rethrown. `resume`: from the run directory's checkpoint (else it is made
// afresh).
inline std::vector<RankRun> train_ranks(const config::ExperimentSpec& spec, int ranks, bool resume = false) {
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  if (!resume) rundir::RunLog::create(spec, /*overwrite=*/true);
  std::vector<RankRun> runs(static_cast<size_t>(ranks));
  ddplab::testing::run_ranks(ranks, [&](const std::shared_ptr<distributed::Comm>& comm) {
    distributed::World world;
    world.rank = comm->rank;
    world.size = world.local_size = ranks;
    world.local_rank = comm->rank;
    ReplicaOptions options;
    options.run_dir = rundir::run_dir(spec);
    options.data = &data;
    options.comm = ranks > 1 ? comm : nullptr;
    options.resume = resume;
    RankRun& run = runs[static_cast<size_t>(comm->rank)];
    options.observer = run.recorder;
    try {
      train_replica(spec, world, options);
    } catch (...) {
      run.error = std::current_exception();
    }
  });
  return runs;
}

inline std::vector<std::shared_ptr<Recorder>> train_observed(const config::ExperimentSpec& spec, int ranks) {
  std::vector<std::shared_ptr<Recorder>> recorders;
  for (const auto& run : train_ranks(spec, ranks)) {
    if (run.error) std::rethrow_exception(run.error);
    recorders.push_back(run.recorder);
  }
  return recorders;
}

// The records of a run directory without the fields that measure the machine (times, host load).
inline std::vector<nlohmann::json> numeric_records(const config::ExperimentSpec& spec) {
  auto records = ddplab::testing::read_records(rundir::run_dir(spec));
  for (auto& r : records)
    for (const auto& k : rundir::EpochRecord::machine_fields()) r.erase(k);
  return records;
}

template <class E>
E thrown(const RankRun& run) {
  try {
    if (run.error) std::rethrow_exception(run.error);
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception: " << e.what();
    throw;
  }
  ADD_FAILURE() << "threw nothing";
  throw std::runtime_error("threw nothing");
}

// The lines of the run directory's steps.jsonl (none when it has no such file).
inline std::vector<nlohmann::json> step_lines(const config::ExperimentSpec& spec) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(rundir::steps_file(rundir::run_dir(spec)));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace ddplab::train
