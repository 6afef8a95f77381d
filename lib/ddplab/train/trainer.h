// The trainer loop of one replica: the heart of a run. Per step: set lr from the fractional
// epoch, prepare the gradient buckets, forward, loss, backward (buckets all-reduce as they
// fill), wait for the reductions, feed the gradient noise scale (train/noise_scale.h), optimizer
// step, then local SGD averaging or the EASGD elastic step when one is due (replica_sync.h).
// Per epoch: sample-weighted train metrics and exact test metrics summed over all replicas, the
// audits below, one record (rank 0). With replicas.mode "simulated" one process computes all
// replicas: the middle of the step runs once per shard (local_replicas.h, simulated.h).
//
// Audits, every epoch (cheap; audits.h): (a) replica consistency: a checksum per parameter
// compared across ranks; a mismatch stops the run naming the first parameter that differs (towers
// that do not share weights). Under local SGD it runs at the first point at or after the epoch's
// end where the replicas agree; under EASGD it checks the center variable. (b) every trainable
// parameter received a gradient and changed during the epoch, else the run stops naming it (an
// averaging loop that updated only the first variable). A failed audit throws AuditFailure, a
// std::runtime_error (exit code 1); under debug.audits "warn" rank 0 prints it and records it in the
// epoch's audit_warnings instead, and training goes on (audits.h, AuditTrail).
//
// The pieces (set-up, the epoch loop, one step, evaluation, the audits, records, checkpoints) are
// the members of class Trainer (trainer_impl.h); train_replica() builds one and runs it.
//
// At the end rank 0 saves the final model (torch::save of the module) as <run_dir>/model.pt (under
// local SGD the replicas' mean, under EASGD the center: what the last epoch evaluated).
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/world.h"
#include "ddplab/train/run_ends.h"

namespace ddplab::distributed {
struct Comm;
}

namespace ddplab::train {

class TrainObserver;

struct ReplicaOptions {
  std::filesystem::path run_dir;            // where rank 0 writes records; must exist (RunLog made)
  bool progress = true;                     // progress lines: rank 0's live one on a TTY, else log.progress_s's
  bool quiet = false;                       // no per-epoch console lines
  const data::DatasetPair* data = nullptr;  // already loaded data (else loaded from spec.dataset)
  // The process group (else made here when world.size > 1). A caller that owns it keeps the
  // connections open while it reports a failure, so peers see this rank's error first.
  std::shared_ptr<distributed::Comm> comm;
  // Continue from <run_dir>/checkpoint.pt (see checkpoint.h); debug faults crash/throw do not
  // fire in a resumed attempt.
  bool resume = false;
  // Who hears of the steps, the epochs' records and notes (observer.h); the Trainer prints nothing
  // itself. Null: the console (console.h) as `progress` and `quiet` say.
  std::shared_ptr<TrainObserver> observer;
};

struct ReplicaResult {
  int epochs_done = 0;
  double final_test_acc = 0;
  double final_train_loss = 0;
};

// True when the mean cross-entropy of an epoch is not finite or over 100 x ln(num_classes), the
// loss of a uniform guess: the weights have blown up. Such a run then often sits at chance with a
// finite loss (dead ReLUs) and would otherwise be reported as a finished run at 10%.
bool loss_has_blown_up(double mean_train_loss, int64_t num_classes);

// make_network(spec, data, 0) on the CPU (network.h), the very set-up the Trainer runs, so that
// errors only it can find (an augment crop larger than the images, a weight_decay_groups entry
// that matches no parameter, a global batch larger than the training set, a model that cannot take
// the images) are ddplab::Errors raised before a run directory is made.
void check_setup(const config::ExperimentSpec& spec, const data::DatasetPair& data);

// Trains replica `world.rank`. Throws AuditFailure on a failed audit, Diverged, Interrupted, and
// other exceptions on runtime failures; writes nothing to the manifest (the caller records the status).
ReplicaResult train_replica(const config::ExperimentSpec& spec, const distributed::World& world,
                            const ReplicaOptions& options);

}  // namespace ddplab::train
