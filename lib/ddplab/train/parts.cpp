#include "ddplab/train/part.h"

namespace ddplab::train {

// The registry: one line per part, X(<name>), each defined by DDPLAB_REGISTER_PART in
// lib/ddplab/train/<name>_part.cpp. Hooks call the parts in this order: a part whose hook must see
// another's effect comes after it (at the end of a run early_stop's note comes before profiler's,
// as the run happened).
#define DDPLAB_FOR_EACH_PART(X) \
  X(noise_scale)                \
  X(weight_ema)                 \
  X(replica_sync_state)         \
  X(reducer_state)              \
  X(step_records)               \
  X(early_stop)                 \
  X(profiler)                   \
  X(subnormal_note)

#define DDPLAB_DECLARE_PART(name) extern const PartEntry DDPLAB_PART_ENTRY(name);
DDPLAB_FOR_EACH_PART(DDPLAB_DECLARE_PART)
#define DDPLAB_ADDRESS_OF_PART(name) &DDPLAB_PART_ENTRY(name),

const std::vector<const PartEntry*>& part_entries() {
  static const std::vector<const PartEntry*> entries{DDPLAB_FOR_EACH_PART(DDPLAB_ADDRESS_OF_PART)};
  return entries;
}

std::vector<std::unique_ptr<Part>> make_parts(const PartContext& context) {
  std::vector<std::unique_ptr<Part>> parts;
  for (const PartEntry* entry : part_entries())
    if (auto part = entry->make(context)) parts.push_back(std::move(part));
  return parts;
}

}  // namespace ddplab::train
