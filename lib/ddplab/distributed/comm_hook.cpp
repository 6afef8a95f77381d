#include "ddplab/distributed/comm_hook.h"

#include <torch/torch.h>

namespace ddplab::distributed {
namespace {

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

class AllreduceHook final : public CommHook {
 public:
  std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) override {
    std::vector<at::Tensor> tensors{bucket.flat};
    return {comm.backend->allreduce(tensors)};
  }
  void finish(Comm&, const BucketView&) override {}
  int64_t payload_bytes(const BucketView& bucket) const override { return bytes_of(bucket.flat); }
};

class CastCompressHook final : public CommHook {
 public:
  explicit CastCompressHook(at::ScalarType wire) : wire_(wire) {}
  std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) override {
    Buffers& b = buffers(bucket);
    b.wire.copy_(bucket.grads);
    std::vector<at::Tensor> wire{b.wire};
    std::vector<c10::intrusive_ptr<c10d::Work>> works{comm.backend->allreduce(wire)};
    if (!bucket.control.defined()) return works;
    b.control.copy_(bucket.control);
    std::vector<at::Tensor> control{b.control};
    works.push_back(comm.backend->allreduce(control));
    return works;
  }
  void finish(Comm&, const BucketView& bucket) override {
    Buffers& b = buffers(bucket);
    bucket.grads.copy_(b.wire);
    if (bucket.control.defined()) bucket.control.copy_(b.control);
  }
  int64_t payload_bytes(const BucketView& bucket) const override {
    return bucket.grads.numel() * c10::elementSize(wire_) + bytes_of(bucket.control);
  }
  void reset() override { buffers_.clear(); }
  // As the wire: each contribution rounded to wire_, the sum added (and rounded) in wire_.
  at::ScalarType sum_dtype(at::ScalarType /*grad*/) const override { return wire_; }
  void add_replica(at::Tensor& sum, const at::Tensor& contribution) const override { sum.add_(contribution.to(wire_)); }

 private:
  struct Buffers {
    at::Tensor wire;     // in wire_, as many as the bucket's gradients
    at::Tensor control;  // fp32 copy of the control slots (last bucket)
  };
  // Made at a bucket's first launch and kept: no allocation per step.
  Buffers& buffers(const BucketView& bucket) {
    if (buffers_.size() <= static_cast<size_t>(bucket.index)) buffers_.resize(static_cast<size_t>(bucket.index) + 1);
    Buffers& b = buffers_[static_cast<size_t>(bucket.index)];
    if (!b.wire.defined()) {
      b.wire = torch::empty({bucket.grads.numel()}, bucket.grads.options().dtype(wire_));
      if (bucket.control.defined()) b.control = torch::empty_like(bucket.control);
    }
    return b;
  }
  at::ScalarType wire_;
  std::vector<Buffers> buffers_;
};

}  // namespace

std::unique_ptr<CommHook> allreduce_hook() { return std::make_unique<AllreduceHook>(); }

std::unique_ptr<CommHook> cast_compress_hook(at::ScalarType wire) {
  TORCH_INTERNAL_ASSERT(wire == at::kBFloat16 || wire == at::kHalf, "a cast wire is bf16 or fp16, got ", wire);
  return std::make_unique<CastCompressHook>(wire);
}

void CommHook::add_replica(at::Tensor& sum, const at::Tensor& contribution) const { sum.add_(contribution); }

std::unique_ptr<CommHook> make_comm_hook(BuiltinCommHook name, const PowerSgdOptions& powersgd) {
  switch (name) {
    case BuiltinCommHook::kAllreduce:
      return allreduce_hook();
    case BuiltinCommHook::kBf16Compress:
      return cast_compress_hook(at::kBFloat16);
    case BuiltinCommHook::kFp16Compress:
      return cast_compress_hook(at::kHalf);
    case BuiltinCommHook::kPowerSgd:
      return powersgd_hook(powersgd);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown comm hook");
}

}  // namespace ddplab::distributed
