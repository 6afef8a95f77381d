// Denormal (subnormal) floats in an optimizer's state: what a CPU run without
// replicas.flush_denormal is told when they are many. On x86 every operation on one goes through a
// microcode assist; SGD's momentum of a weight whose gradient stays 0 (a unit that never fires)
// shrinks into that range and stays there, so each later step's update pays for them
// (docs/performance.md, "Denormal numbers").
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <torch/optim/optimizer.h>

#include "ddplab/train/audits.h"

namespace ddplab::train {

// Whether this build's CPU computes on denormals through microcode assists (x86): the Trainer
// counts and notes only there.
#if defined(__x86_64__) || defined(__i386__)
inline constexpr bool kDenormalsAssisted = true;
#else
inline constexpr bool kDenormalsAssisted = false;
#endif

struct SubnormalState {
  int64_t values = 0;     // float32 values in the state (SGD's momentum, Adam's moments), the
                          // type ddplab's optimizers keep; others are not counted
  int64_t subnormal = 0;  // of them, nonzero with a magnitude below the type's smallest normal
  // The parameter whose state holds the most (empty when none does), with its counts.
  std::string top_name;
  int64_t top_values = 0, top_subnormal = 0;
};

// Counts the state of `optimizer` (made by make_optimizer over `named`); zeros are not denormal.
// The count compares values, so it reads 0 on a thread that treats denormals as zero (DAZ): count
// with it off.
SubnormalState subnormal_state(const torch::optim::Optimizer& optimizer, const NamedTensors& named);

// The note for epoch `epoch` (1-based) when at least 1% of the state's values are subnormal:
// how many, where most are, and that replicas.flush_denormal flushes them. Nothing below that.
std::optional<std::string> subnormal_note(const SubnormalState& state, int epoch);

}  // namespace ddplab::train
