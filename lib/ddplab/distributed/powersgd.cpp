// PowerSGD (Vogels et al. 2019) as DDP's powerSGD_hook does it, on ddplab's buckets: the
// semantics of PyTorch's hook reimplemented (comm_hook.h, PowerSgdOptions). One difference of
// form: ddplab's buckets arrive divided by N under "mean" (DDP's hook divides itself), so what
// is summed here is already the mean, and the error kept is this rank's input minus 1/N of the
// reduced result: PyTorch's error divided by N. For N a power of two every value equals PyTorch's
// scaled by an exact power of two.
#include <algorithm>
#include <iterator>
#include <random>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/distributed/comm_hook.h"

namespace ddplab::distributed {
namespace {

// NumPy's legacy RandomState(seed).randint(10**9), which seeds PyTorch's Q draws: MT19937 seeded
// by init_genrand (std::mt19937's seeding), each 32-bit output masked to 30 bits, values above
// 10^9 - 1 drawn again. Its state is the seed and the number of outputs drawn.
class SeedStream {
 public:
  explicit SeedStream(uint32_t seed) : seed_(seed), mt_(seed) {}
  uint64_t next() {
    constexpr uint32_t kMask = (1u << 30) - 1, kMax = 999'999'999;
    for (;;) {
      ++draws_;
      if (const uint32_t v = static_cast<uint32_t>(mt_()) & kMask; v <= kMax) return v;
    }
  }
  int64_t draws() const { return draws_; }
  void restore(int64_t draws) {
    mt_.seed(seed_);
    mt_.discard(static_cast<unsigned long long>(draws));
    draws_ = draws;
  }

 private:
  uint32_t seed_;
  std::mt19937 mt_;
  int64_t draws_ = 0;
};

// PyTorch's _orthogonalize of a batch of b x n x r matrices (r <= n), in place: Gram-Schmidt
// (each column normalized, then removed from the columns after it) for r <= 2 or half dtypes,
// Householder QR otherwise.
void orthogonalize(const at::Tensor& m, double epsilon) {
  const int64_t r = m.size(2);
  if (r > 2 && m.scalar_type() != at::kHalf && m.scalar_type() != at::kBFloat16) {
    m.copy_(std::get<0>(at::linalg_qr(m)));
    return;
  }
  const int64_t dim[] = {1};
  for (int64_t i = 0; i < r; ++i) {
    at::Tensor col = m.narrow(2, i, 1);
    const at::Tensor norm = at::linalg_vector_norm(col, 2, at::IntArrayRef(dim), /*keepdim=*/true);
    col.div_(epsilon == 0 ? norm : norm + epsilon);
    if (i + 1 < r) {
      at::Tensor rest = m.narrow(2, i + 1, r - i - 1);
      rest.sub_((col * rest).sum(at::IntArrayRef(dim), /*keepdim=*/true) * col);
    }
  }
}

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

class PowerSgdHook final : public CommHook {
 public:
  explicit PowerSgdHook(const PowerSgdOptions& options) : options_(options), rng_(options.seed) {}

  std::vector<c10::intrusive_ptr<c10d::Work>> launch(Comm& comm, const BucketView& bucket) override {
    State& s = state(bucket);
    if (iter_ < options_.start_iter) {
      s.compressed = false;
      s.bytes = bytes_of(bucket.flat);
      std::vector<at::Tensor> flat{bucket.flat};
      return {comm.backend->allreduce(flat)};
    }
    s.compressed = true;
    add_error(s, bucket);
    pack_uncompressed(s, bucket);
    prepare_qs(s, bucket);
    for (Matrix& x : s.matrices) at::bmm_out(x.p, x.m, x.q);
    s.bytes = (s.sent.numel() + s.p.numel() + s.q.numel()) * bucket.grads.element_size();
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (at::Tensor t : {s.sent, s.p}) {
      if (t.numel() == 0) continue;
      std::vector<at::Tensor> one{t};
      works.push_back(comm.backend->allreduce(one));
    }
    return works;
  }

  void finish(Comm& comm, const BucketView& bucket) override {
    State& s = state(bucket);
    if (s.compressed) {
      unpack_uncompressed(s, bucket);
      for (const Matrix& x : s.matrices) orthogonalize(x.p, options_.orthogonalization_epsilon);
      for (Matrix& x : s.matrices) at::bmm_out(x.q, x.m.transpose(1, 2), x.p);
      if (s.q.numel() > 0) {
        std::vector<at::Tensor> q{s.q};
        comm.backend->allreduce(q)->wait();
      }
      for (Matrix& x : s.matrices) at::bmm_out(x.m, x.p, x.q.transpose(1, 2));
      // This rank's input less its 1/N share of what the ranks agreed on.
      if (options_.error_feedback) at::sub_out(s.error, s.input, bucket.grads, 1.0 / comm.size);
      if (!options_.warm_start) s.p = s.q = at::Tensor();
    }
    if (bucket.control.defined()) ++iter_;  // the last bucket: a step done, as PyTorch's iter
  }

  int64_t payload_bytes(const BucketView& bucket) const override {
    const size_t b = static_cast<size_t>(bucket.index);
    return b < states_.size() && states_[b].bytes >= 0 ? states_[b].bytes : bytes_of(bucket.flat);
  }

  void reset() override { states_.clear(); }
  // Each rank orthogonalizes the all-reduced P before Q is sent: N replicas in one process cannot.
  bool simulates() const override { return false; }

  at::Tensor save_state() const override;
  void load_state(const at::Tensor& blob) override;

 private:
  struct Matrix {
    at::Tensor m;     // 1 x n x m view of the gradient
    at::Tensor p, q;  // 1 x n x r and 1 x m x r views of State::p and State::q
    int64_t rows = 0, cols = 0, rank = 0;
  };
  // Per bucket, from its first launch until reset().
  struct State {
    bool planned = false;
    std::vector<at::Tensor> uncompressed;  // gradients sent as they are, in bucket order
    std::vector<Matrix> matrices;          // the others, in PyTorch's order (see plan())
    int64_t p_numel = 0, q_numel = 0;
    at::Tensor sent;   // the uncompressed gradients, then the control slots
    at::Tensor p, q;   // all matrices' P and Q; q defined: a Q to start from (warm start)
    at::Tensor error;  // error feedback (defined from the first compressed step)
    at::Tensor input;  // this step's gradients plus error, before the reduction
    bool compressed = false;
    int64_t bytes = -1;  // all-reduced at the last launch; -1: none yet
  };

  State& state(const BucketView& bucket) {
    const size_t b = static_cast<size_t>(bucket.index);
    if (states_.size() <= b) states_.resize(b + 1);
    State& s = states_[b];
    if (!s.planned) plan(s, bucket);
    return s;
  }

  void plan(State& s, const BucketView& bucket) const;
  void add_error(State& s, const BucketView& bucket) const;
  void pack_uncompressed(State& s, const BucketView& bucket) const;
  void unpack_uncompressed(State& s, const BucketView& bucket) const;
  void prepare_qs(State& s, const BucketView& bucket);

  PowerSgdOptions options_;
  SeedStream rng_;    // PowerSGDState.rng
  int64_t iter_ = 0;  // reduced steps so far (PowerSGDState.iter)
  std::vector<State> states_;
};

// PyTorch's split: a gradient viewed as n x m (n its first dimension) with r = min(n, m, rank)
// is compressed when (n + m) r * min_compression_rate < n m. The compressed ones are grouped by
// (n, m), groups in order of first appearance: the order of their P and Q in the memories and of
// their random draws.
void PowerSgdHook::plan(State& s, const BucketView& bucket) const {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<at::Tensor>>> groups;
  for (const at::Tensor& g : bucket.gradients) {
    const int64_t n = g.dim() == 0 ? 1 : g.size(0), m = n == 0 ? 0 : g.numel() / n;
    const int64_t r = std::min({n, m, options_.rank});
    if (g.numel() == 0 ||
        static_cast<double>((n + m) * r) * options_.min_compression_rate >= static_cast<double>(n * m)) {
      s.uncompressed.push_back(g);
      continue;
    }
    const std::pair<int64_t, int64_t> shape{n, m};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == shape; });
    if (it == groups.end()) {
      groups.emplace_back(shape, std::vector<at::Tensor>{});
      it = std::prev(groups.end());
    }
    it->second.push_back(g);
  }
  for (const auto& [shape, tensors] : groups)
    for (const at::Tensor& g : tensors) {
      const auto [n, m] = shape;
      const int64_t r = std::min({n, m, options_.rank});
      s.matrices.push_back(Matrix{g.view({1, n, m}), {}, {}, n, m, r});
      s.p_numel += n * r;
      s.q_numel += m * r;
    }
  int64_t sent = bucket.control.defined() ? bucket.control.numel() : 0;
  for (const at::Tensor& g : s.uncompressed) sent += g.numel();
  s.sent = at::empty({sent}, bucket.grads.options());
  s.planned = true;
}

void PowerSgdHook::add_error(State& s, const BucketView& bucket) const {
  if (!options_.error_feedback) return;
  if (s.error.defined()) {
    TORCH_INTERNAL_ASSERT(s.error.numel() == bucket.grads.numel(), "PowerSGD error of bucket ", bucket.index, " holds ",
                          s.error.numel(), " values for ", bucket.grads.numel(), " gradients");
    if (s.error.device() != bucket.grads.device()) s.error = s.error.to(bucket.grads.device());
    bucket.grads.add_(s.error);
  } else {
    s.error = at::zeros_like(bucket.grads);
  }
  if (!s.input.defined()) s.input = at::empty_like(bucket.grads);
  s.input.copy_(bucket.grads);
}

void PowerSgdHook::pack_uncompressed(State& s, const BucketView& bucket) const {
  int64_t offset = 0;
  for (const at::Tensor& g : s.uncompressed) {
    s.sent.narrow(0, offset, g.numel()).copy_(g.reshape({-1}));
    offset += g.numel();
  }
  if (bucket.control.defined()) s.sent.narrow(0, offset, bucket.control.numel()).copy_(bucket.control);
}

void PowerSgdHook::unpack_uncompressed(State& s, const BucketView& bucket) const {
  int64_t offset = 0;
  for (const at::Tensor& g : s.uncompressed) {
    g.copy_(s.sent.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
  if (bucket.control.defined()) bucket.control.copy_(s.sent.narrow(0, offset, bucket.control.numel()));
}

// Each step's power iteration starts from the last step's Q, orthogonalized (warm start), or
// from new random ones: one seed drawn per bucket, then each Q in order from a CPU generator so
// seeded (PyTorch draws them under fork_rng, so no other random stream moves).
void PowerSgdHook::prepare_qs(State& s, const BucketView& bucket) {
  const at::TensorOptions options = bucket.grads.options();
  const bool fresh = !options_.warm_start || !s.q.defined();
  if (fresh) s.q = at::empty({s.q_numel}, options);
  if (s.q.device() != options.device()) s.q = s.q.to(options.device());
  if (!s.p.defined()) s.p = at::empty({s.p_numel}, options);
  int64_t p_at = 0, q_at = 0;
  for (Matrix& x : s.matrices) {
    x.p = s.p.narrow(0, p_at, x.rows * x.rank).view({1, x.rows, x.rank});
    x.q = s.q.narrow(0, q_at, x.cols * x.rank).view({1, x.cols, x.rank});
    p_at += x.rows * x.rank;
    q_at += x.cols * x.rank;
  }
  if (!fresh) {
    for (const Matrix& x : s.matrices) orthogonalize(x.q, options_.orthogonalization_epsilon);
    return;
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(rng_.next());
  for (const Matrix& x : s.matrices) {
    x.q.copy_(at::randn({1, x.cols, x.rank}, generator, options.device(at::kCPU)));
    orthogonalize(x.q, options_.orthogonalization_epsilon);
  }
}

std::string serialized(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  return bytes;
}

// iter, the seed stream's draws, and per bucket its Q and error where defined.
at::Tensor PowerSgdHook::save_state() const {
  torch::serialize::OutputArchive archive;
  archive.write("iter", torch::tensor(iter_, torch::kInt64));
  archive.write("draws", torch::tensor(rng_.draws(), torch::kInt64));
  archive.write("buckets", torch::tensor(static_cast<int64_t>(states_.size()), torch::kInt64));
  for (size_t b = 0; b < states_.size(); ++b) {
    if (states_[b].q.defined()) archive.write(fmt::format("q{}", b), states_[b].q.cpu());
    if (states_[b].error.defined()) archive.write(fmt::format("error{}", b), states_[b].error.cpu());
  }
  const std::string bytes = serialized(archive);
  return torch::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, torch::kUInt8).clone();
}

// InputArchive::read() writes into a defined tensor's storage: each read takes a fresh one.
at::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor t;
  archive.read(key, t);
  return t;
}

void PowerSgdHook::load_state(const at::Tensor& blob) {
  const at::Tensor bytes = blob.to(torch::kCPU).contiguous();
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
  iter_ = read_tensor(archive, "iter").item<int64_t>();
  rng_.restore(read_tensor(archive, "draws").item<int64_t>());
  states_.clear();
  states_.resize(static_cast<size_t>(read_tensor(archive, "buckets").item<int64_t>()));
  for (size_t b = 0; b < states_.size(); ++b) {
    if (at::Tensor q; archive.try_read(fmt::format("q{}", b), q)) states_[b].q = q;
    if (at::Tensor error; archive.try_read(fmt::format("error{}", b), error)) states_[b].error = error;
  }
}

}  // namespace

std::unique_ptr<CommHook> powersgd_hook(const PowerSgdOptions& options) {
  TORCH_INTERNAL_ASSERT(options.rank >= 1, "PowerSGD rank ", options.rank);
  TORCH_INTERNAL_ASSERT(options.start_iter >= 2 || !(options.error_feedback || options.warm_start),
                        "PowerSGD with error feedback or warm start starts at iteration 2 or later (the buckets are "
                        "rebuilt after the first step)");
  return std::make_unique<PowerSgdHook>(options);
}

}  // namespace ddplab::distributed
