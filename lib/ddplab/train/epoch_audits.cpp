#include "ddplab/train/epoch_audits.h"

#include <algorithm>

#include "ddplab/train/tensor_lists.h"

namespace ddplab::train {

EpochAudits::EpochAudits(const config::ExperimentSpec& spec, const Network& net, distributed::GradReducer& reducer,
                         const ReplicaSync& sync, const LrSchedule& schedule, int64_t steps_per_epoch,
                         std::shared_ptr<distributed::Comm> comm)
    : spec_(spec),
      net_(net),
      reducer_(reducer),
      sync_(sync),
      schedule_(schedule),
      steps_(steps_per_epoch),
      comm_(std::move(comm)),
      trail_(spec.debug.audits) {}

void EpochAudits::start_epoch() {
  reducer_.reset_received();
  snapshot_ = clone_all(net_.params);
}

void EpochAudits::after_step(int index, int64_t global_step) {
  if (!trail_.replica_check_deferred() || !comm_ || !sync_.replicas_agree_after(global_step)) return;
  trail_.run([&] { check_replica_consistency(*comm_, net_.named, index, "parameter"); });
  trail_.defer_replica_check(false);
}

void EpochAudits::check_replicas(int index, int64_t global_steps) {
  if (!comm_) return;
  if (sync_.method() == config::SyncMethod::kEasgd) {
    NamedTensors center;
    const auto c = sync_.center();
    for (size_t i = 0; i < net_.named.size(); ++i) center.emplace_back(net_.named[i].first, c[i]);
    trail_.run([&] { check_replica_consistency(*comm_, center, index + 1, "EASGD center variable of parameter"); });
  } else if (sync_.replicas_agree_after(global_steps - 1)) {
    trail_.run([&] { check_replica_consistency(*comm_, net_.named, index + 1, "parameter"); });
  } else {
    trail_.defer_replica_check();
  }
}

std::vector<std::string> EpochAudits::at_end(int index, bool trained, const rundir::EpochRecord& rec) {
  if (trained)
    trail_.run([&] {
      check_gradients_and_updates(net_.named, snapshot_, reducer_.received_grad(), index + 1,
                                  sgd_step_bound(spec_.optimizer, peak_lr(index)));
    });
  trail_.run([&] { check_loss_is_cross_entropy(rec.train_loss, rec.train_acc, index + 1); });
  return trail_.take();
}

// The epoch's largest lr (the update audit's bound on an SGD step).
double EpochAudits::peak_lr(int index) const {
  double peak = 0;
  for (int64_t s = 0; s < steps_; ++s) peak = std::max(peak, schedule_(index + static_cast<double>(s) / steps_));
  return peak;
}

}  // namespace ddplab::train
