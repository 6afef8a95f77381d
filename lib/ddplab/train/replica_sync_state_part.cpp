// What local SGD and EASGD keep beyond the model rank 0 saves (replica_sync.h): the EASGD center
// (easgd_center, identical on every rank) and, over 2+ processes, every rank's own model and
// optimizer state (replica_states, index = rank), from which each rank resumes.
#include <memory>

#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/replica_sync.h"

namespace ddplab::train {
namespace {

class ReplicaSyncStatePart : public Part {
 public:
  explicit ReplicaSyncStatePart(const PartContext& c) : c_(c) {}

  void save(PartState& state) override {
    state.set("easgd_center", c_.sync.center());
    if (c_.world.size > 1)
      state.set("replica_states", gather_replica_states(*c_.comm, *c_.net.model, *c_.net.optimizer));
  }

  void load(const PartState& state, const std::filesystem::path& file) override {
    if (const auto states = state.list("replica_states"); !states.empty())
      load_replica_state_blob(own_entry(file, states, "the states of {} replicas", c_.world.rank, c_.world.size),
                              *c_.net.model, *c_.net.optimizer);
    c_.sync.set_center(state.list("easgd_center"));
  }

 private:
  PartContext c_;
};

std::unique_ptr<Part> make(const PartContext& c) {
  if (c.sync.method() == config::SyncMethod::kAllreduce) return nullptr;
  return std::make_unique<ReplicaSyncStatePart>(c);
}

}  // namespace

DDPLAB_REGISTER_PART(replica_sync_state, &make);

}  // namespace ddplab::train
