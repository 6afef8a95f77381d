// How a filled gradient bucket travels, chosen as DDP's register_comm_hook lets one choose: the
// GradReducer (grad_reducer.h) calls launch() when every gradient of a bucket is ready (in bucket
// order on every rank; the gradients already divided by the world size under reduce "mean"), waits
// for the works it returned, then calls finish(), which must leave the reduced values in the bucket.
// Whatever the gradients travel as, the control slots of the last bucket (stop flag, local squared
// norm, used flags) must come back summed exactly in float32: they are not gradients.
//
//   allreduce_hook()      the bucket as it is, one all-reduce (DDP's default allreduce_hook);
//   bf16_compress_hook()  the gradients cast into a persistent bfloat16 buffer, all-reduced in
//                         bf16 (half the bytes), cast back in finish(); the control slots in a
//                         second, small fp32 all-reduce (DDP's bf16_compress_hook; replicas.grad_dtype "bf16").
//
// A new hook (fp16, PowerSGD, top-k) is a CommHook subclass, a factory here and a value of
// replicas.grad_dtype (docs/architecture.md, "How to extend").
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ddplab/distributed/comm.h"

namespace ddplab::distributed {

// One bucket as a hook sees it; views into the bucket's one flat buffer.
struct BucketView {
  int index = 0;       // the bucket's number: stable until CommHook::reset()
  at::Tensor flat;     // grads followed by control: what the default hook all-reduces
  at::Tensor grads;    // the gradients (flat)
  at::Tensor control;  // the last bucket's control slots; undefined in the others
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // Starts the all-reduce(s) of `bucket` over `comm` (asynchronous); returns what to wait for.
  virtual std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) = 0;
  // After those works completed: puts the reduced values into bucket.flat.
  virtual void finish(const BucketView& bucket) = 0;
  // Bytes all-reduced for `bucket` per step (what the ring all-reduce's traffic is counted on).
  virtual int64_t payload_bytes(const BucketView& bucket) const = 0;
  // The buckets were rebuilt: per-bucket state is stale.
  virtual void reset() {}
};

std::unique_ptr<CommHook> allreduce_hook();
std::unique_ptr<CommHook> bf16_compress_hook();

}  // namespace ddplab::distributed
