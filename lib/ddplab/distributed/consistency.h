// Replica consistency: do all ranks hold the same tensors? Each rank sums every tensor and its
// squares in float64 on the CPU (two checksums per tensor), and one all-reduce of the checksums
// and their negations gives every rank the largest and the smallest value of each checksum; a
// tensor whose two differ differs between the ranks. Cheap (one small message), so the trainer
// runs it every epoch on the parameters (towers that do not share weights, a skipped initial
// broadcast) or on EASGD's center variable.
//
// Every rank of `comm` must call it at the same point with tensors of the same count and names
// (it is a collective). The checksums compare exactly: equal tensors always agree, and a
// difference that leaves both sums unchanged goes unseen.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/distributed/comm.h"

namespace ddplab::distributed {

struct ReplicaMismatch {
  size_t index = 0;  // into `named`
  std::string name;
  double lo = 0, hi = 0;  // the smallest and largest sum of the tensor over the ranks
};

// The first tensor of `named` whose checksums differ between the ranks (the same answer on every
// rank), or nullopt when they all agree.
std::optional<ReplicaMismatch> first_replica_mismatch(Comm& comm,
                                                      const std::vector<std::pair<std::string, at::Tensor>>& named);

}  // namespace ddplab::distributed
