// The trainer loop of one replica: the heart of a run. Per step: set lr from the fractional
// epoch, prepare the gradient buckets, forward, loss, backward (buckets all-reduce as they
// fill), wait for the reductions, optimizer step. Per epoch: sample-weighted train metrics
// and exact test metrics summed over all replicas, the audits below, one record (rank 0).
//
// Audits, every epoch (cheap): (a) replica consistency: a checksum per parameter compared
// across ranks; a mismatch stops the run naming the first parameter that differs (towers that
// do not share weights). (b) every trainable parameter received a gradient and changed during
// the epoch, else the run stops naming it (an averaging loop that updated only the first
// variable).
#pragma once
#include <filesystem>
#include <string>

#include "ddplab/data/dataset.h"
#include "ddplab/dist/world.h"
#include "ddplab/spec/spec.h"

namespace ddplab::train {

struct ReplicaOptions {
  std::filesystem::path run_dir;  // where rank 0 writes records; must exist (RunLog made)
  bool progress = true;           // live progress line on rank 0 when stdout is a TTY
  bool quiet = false;             // no per-epoch console lines
  const data::DatasetPair* data = nullptr;  // already loaded data (else loaded from spec.dataset)
};

struct ReplicaResult {
  int epochs_done = 0;
  double final_test_acc = 0;
  double final_train_loss = 0;
};

// Trains replica `world.rank`. Throws ddplab::Error on a failed audit and other exceptions on
// runtime failures; writes nothing to the manifest (the caller records the status).
ReplicaResult train_replica(const spec::ExperimentSpec& spec, const dist::World& world,
                            const ReplicaOptions& options);

}  // namespace ddplab::train
