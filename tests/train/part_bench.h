// A part of train/ (part.h) tested by its registered name, without a Trainer: the PartContext of a
// real one-process run of `spec` on the CPU (its network, GradReducer, replicas, ReplicaSync,
// EpochModel), a run directory, and a RunWriter whose observer records the notes and records.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/epoch_model.h"
#include "ddplab/train/local_replicas.h"
#include "ddplab/train/network.h"
#include "ddplab/train/options.h"
#include "ddplab/train/part.h"
#include "ddplab/train/replica_sync.h"
#include "ddplab/train/run_writer.h"
#include "train/train_ranks.h"

namespace ddplab::train {

struct PartBench {
  PartBench(const config::ExperimentSpec& spec, const data::DatasetPair& data)
      : spec(spec), net(make_network(spec, data, /*rank=*/0)) {
    rundir::RunLog::create(spec, /*overwrite=*/true);
    reducer = std::make_unique<distributed::GradReducer>(net.params, nullptr, grad_reducer_options(spec.replicas));
    replicas = make_local_replicas(spec, world, net, *reducer, nullptr);
    sync.emplace(spec.replicas.sync, /*steps_per_epoch=*/4, net.params, nullptr);
    epoch_model.emplace(net, spec.model.ema_decay);
    writer.emplace(rundir::run_dir(spec), /*lead=*/true, recorder);
  }

  // The registered part `name` over this bench (null when the spec leaves it off).
  std::unique_ptr<Part> make(const std::string& name) {
    for (const PartEntry* entry : part_entries())
      if (entry->name == name)
        return entry->make({spec, world, net, *reducer, *replicas, *sync, *epoch_model, nullptr, *writer, 4});
    ADD_FAILURE() << "no part " << name << " is registered";
    return nullptr;
  }

  const config::ExperimentSpec& spec;
  distributed::World world;
  Network net;
  std::unique_ptr<distributed::GradReducer> reducer;
  std::unique_ptr<LocalReplicas> replicas;
  std::optional<ReplicaSync> sync;
  std::optional<EpochModel> epoch_model;
  std::shared_ptr<Recorder> recorder = std::make_shared<Recorder>();
  std::optional<RunWriter> writer;
};

}  // namespace ddplab::train
