#include "ddplab/distributed/grad_reducer.h"

#include <map>
#include <unordered_set>

#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"

namespace ddplab::distributed {
namespace {

class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit ReadyHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  void operator()(const torch::autograd::Variable&) override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

GradReducer::GradReducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, GradReducerOptions options)
    : params_(std::move(params)),
      comm_(std::move(comm)),
      options_(options),
      hook_(make_comm_hook(options.comm_hook, options.powersgd)),
      timer_(params_.empty() ? c10::Device(c10::kCPU) : params_[0].device()) {
  received_.assign(params_.size(), false);
  used_.assign(params_.size(), false);
  std::unordered_set<const c10::TensorImpl*> distinct;
  for (const auto& p : params_)
    TORCH_INTERNAL_ASSERT(distinct.insert(p.unsafeGetTensorImpl()).second,
                          "GradReducer: a parameter given twice (tied weights are deduplicated before)");
  std::vector<size_t> order;
  for (size_t i = params_.size(); i-- > 0;)
    if (params_[i].requires_grad()) order.push_back(i);
  build_buckets(order);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) continue;
    torch::autograd::impl::set_post_acc_grad_hooks(params_[i],
                                                   std::make_unique<ReadyHook>([this, i] { mark_ready(i); }));
  }
  options_.rebuild_buckets = options_.rebuild_buckets && comm_ != nullptr;
}

GradReducer::~GradReducer() {
  for (auto& p : params_)
    if (p.requires_grad()) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void GradReducer::build_buckets(const std::vector<size_t>& order) {
  buckets_.clear();
  bucket_of_.assign(params_.size(), -1);
  index_in_.assign(params_.size(), -1);
  auto cap_bytes = [&](size_t b) {
    return static_cast<int64_t>((b == 0 ? options_.first_bucket_mb : options_.bucket_mb) * 1024 * 1024);
  };
  // One open group per dtype; a group that reaches its cap is closed and the next one of its
  // dtype opens. Groups are numbered as they open, which orders them by their first parameter.
  std::vector<std::vector<size_t>> groups;
  std::vector<int64_t> bytes;
  std::map<at::ScalarType, size_t> open;
  for (size_t i : order) {
    const auto it = open.find(params_[i].scalar_type());
    if (it == open.end() || bytes[it->second] >= cap_bytes(it->second)) {
      open[params_[i].scalar_type()] = groups.size();
      groups.emplace_back();
      bytes.push_back(0);
    }
    const size_t g = open[params_[i].scalar_type()];
    groups[g].push_back(i);
    bytes[g] += params_[i].numel() * params_[i].element_size();
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    auto& g = groups[gi];
    Bucket b;
    b.params = g;
    int64_t numel = 0;
    for (size_t i : g) {
      b.offsets.push_back(numel);
      numel += params_[i].numel();
    }
    b.grad_numel = numel;
    const bool last = gi + 1 == groups.size();
    b.flat = torch::zeros({numel + (last ? extra_slots() : 0)}, params_[g.front()].options().requires_grad(false));
    b.grads = b.flat.narrow(0, 0, numel);
    if (last) {
      b.control = b.flat.narrow(0, numel, extra_slots());
      b.used_flags = b.flat.narrow(0, numel + slots_.size(), static_cast<int64_t>(params_.size()));
    }
    for (size_t k = 0; k < g.size(); ++k) {
      bucket_of_[g[k]] = static_cast<int>(buckets_.size());
      index_in_[g[k]] = static_cast<int64_t>(k);
      b.grad_views.push_back(b.flat.narrow(0, b.offsets[k], params_[g[k]].numel()).view(params_[g[k]].sizes()));
    }
    buckets_.push_back(std::move(b));
  }
  hook_->reset();
}

void GradReducer::register_comm_hook(std::unique_ptr<CommHook> hook) {
  TORCH_INTERNAL_ASSERT(hook != nullptr && steps_ == 0, "register_comm_hook: a hook, before the first backward");
  hook_ = std::move(hook);
}

BucketView GradReducer::bucket_view(size_t b) const {
  const Bucket& bucket = buckets_[b];
  return BucketView{static_cast<int>(b), bucket.flat, bucket.grads, bucket.control, bucket.grad_views};
}

void GradReducer::prepare_for_backward(bool accumulate) {
  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    if (!accumulate)
      b.flat.zero_();
    else if (b.control.defined())
      b.control.zero_();
    b.pending = b.params.size();
    b.works.clear();
    for (size_t k = 0; k < b.params.size(); ++k) params_[b.params[k]].mutable_grad() = b.grad_views[k];
  }
  if (!accumulate) used_.assign(params_.size(), false);
  if (!buckets_.empty()) slots_.write(bucket_view(buckets_.size() - 1).control, {stop_requested_, false});
  if (reducing() && !buckets_.empty()) local_sq_ = torch::zeros({}, buckets_.back().flat.options());
  next_bucket_ = 0;
}

void GradReducer::mark_ready(size_t param) {
  received_[param] = true;
  used_[param] = true;
  if (!rebuilt_ && steps_ == 0) arrival_.push_back(param);
  int b = bucket_of_[param];
  TORCH_INTERNAL_ASSERT(b >= 0, "gradient hook fired for a parameter without a bucket");
  Bucket& bucket = buckets_[b];
  // A parameter used twice in one graph still accumulates once; its hook fires once per backward.
  TORCH_INTERNAL_ASSERT(bucket.pending > 0, "bucket ", b,
                        " got more gradients than it has parameters (a second backward without "
                        "prepare_for_backward()?)");
  const auto& p = params_[param];
  const auto& view = bucket.grad_views[static_cast<size_t>(index_in_[param])];
  if (!p.grad().is_same(view) && p.grad().data_ptr() != view.data_ptr()) view.copy_(p.grad());
  if (--bucket.pending == 0) launch_ready_buckets();
}

void GradReducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(buckets_[next_bucket_++]);
}

void GradReducer::launch(Bucket& bucket) {
  if (!reducing()) return;
  const BucketView v = bucket_view(static_cast<size_t>(&bucket - buckets_.data()));
  local_sq_ += v.grads.dot(v.grads);
  if (v.control.defined()) {
    slots_.write_local_norm(v.control, local_sq_);
    bucket.used_flags.fill_(1.0);
    for (size_t i = 0; i < params_.size(); ++i)
      if (!used_[i]) bucket.used_flags[static_cast<int64_t>(i)].fill_(0.0);
  }
  if (options_.reduce == config::Reduce::kMean) bucket.flat.div_(comm_->size);
  bucket.works = hook_->launch(*comm_, v);
}

void GradReducer::finalize() {
  torch::NoGradGuard no_grad;
  while (next_bucket_ < buckets_.size()) {
    buckets_[next_bucket_].pending = 0;
    launch(buckets_[next_bucket_++]);
  }
  // On CUDA, wait() only makes the compute stream wait for the all-reduce; the timer's events
  // measure that stall on the stream itself. Nothing to wait for (one replica, no_sync): no timing.
  if (reducing()) {
    timer_.start();
    for (auto& b : buckets_)
      for (auto& work : b.works) work->wait();
    timer_.stop();
  }
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!buckets_[b].works.empty()) hook_->finish(*comm_, bucket_view(b));
  // Autograd may have replaced a .grad (e.g. a sparse or differently strided gradient); put the
  // reduced values back where the optimizer reads them.
  for (auto& b : buckets_)
    for (size_t k = 0; k < b.params.size(); ++k) {
      auto& p = params_[b.params[k]];
      if (!p.grad().is_same(b.grad_views[k])) p.mutable_grad() = b.grad_views[k];
    }
  reduced_ = reducing() && !buckets_.empty();
  if (reduced_) {
    const at::Tensor control = bucket_view(buckets_.size() - 1).control;
    stop_flag_ = slots_.stop(control);  // > 0 if any rank asked
    local_sq_mean_ = slots_.local_norm(control).clone();
    if (options_.reduce == config::Reduce::kSum) local_sq_mean_.div_(comm_->size);
  } else {
    // One replica: its own request; no_sync steps agree nothing (the averaging step does).
    if (!no_stop_.defined())
      no_stop_ = torch::zeros({1}, buckets_.empty() ? torch::TensorOptions() : buckets_.back().flat.options());
    const bool own = require_sync_ && !buckets_.empty();
    stop_flag_ = own ? slots_.stop(bucket_view(buckets_.size() - 1).control) : no_stop_;
    local_sq_mean_ = at::Tensor();
  }
  const std::vector<size_t> unused = unused_by_all();
  ++steps_;
  maybe_rebuild();
  for (size_t i : unused) params_[i].mutable_grad() = at::Tensor();
}

// The trainable parameters that no replica used in this step's backward (after the reduction).
std::vector<size_t> GradReducer::unused_by_all() const {
  std::vector<size_t> unused;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!used_[i] && params_[i].requires_grad()) unused.push_back(i);
  if (unused.empty() || !reduced_) return unused;
  const auto used = buckets_.back().used_flags.to(torch::kCPU, torch::kFloat32);
  const auto flags = used.accessor<float, 1>();
  std::vector<size_t> by_all;
  for (size_t i : unused)
    if (!(flags[static_cast<int64_t>(i)] > 0)) by_all.push_back(i);
  return by_all;
}

void GradReducer::maybe_rebuild() {
  if (!options_.rebuild_buckets || rebuilt_) return;
  rebuilt_ = true;
  // Rank 0's arrival order decides; parameters that never arrived go last.
  std::vector<bool> seen(params_.size(), false);
  std::vector<int64_t> order;
  for (size_t i : arrival_) {
    if (!seen[i]) order.push_back(static_cast<int64_t>(i));
    seen[i] = true;
  }
  for (size_t i = params_.size(); i-- > 0;)
    if (!seen[i] && params_[i].requires_grad()) order.push_back(static_cast<int64_t>(i));
  auto t = torch::tensor(order, torch::kInt64);
  broadcast_coalesced(*comm_, {t}, 0);
  std::vector<size_t> agreed;
  auto acc = t.accessor<int64_t, 1>();
  for (int64_t k = 0; k < t.numel(); ++k) agreed.push_back(static_cast<size_t>(acc[k]));
  // Keep the reduced gradients of this step: the optimizer has not stepped yet.
  std::vector<at::Tensor> grads;
  for (auto& p : params_) grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  // After a no_sync() backward the next backward accumulates: what this one used still counts.
  const std::vector<bool> used = used_;
  build_buckets(agreed);
  prepare_for_backward();
  used_ = used;
  for (size_t i = 0; i < params_.size(); ++i)
    if (grads[i].defined()) params_[i].mutable_grad().copy_(grads[i]);
}

std::vector<std::vector<size_t>> GradReducer::bucket_layout() const {
  std::vector<std::vector<size_t>> layout;
  for (const auto& b : buckets_) layout.push_back(b.params);
  return layout;
}

std::vector<int64_t> GradReducer::rebuilt_layout() const {
  std::vector<int64_t> order;
  if (!rebuilt_) return order;
  for (const auto& b : buckets_)
    for (size_t i : b.params) order.push_back(static_cast<int64_t>(i));
  return order;
}

void GradReducer::restore_layout(const std::vector<int64_t>& order) {
  std::vector<bool> seen(params_.size(), false);
  std::vector<size_t> layout;
  for (int64_t i : order) {
    const bool valid = i >= 0 && static_cast<size_t>(i) < params_.size() && !seen[static_cast<size_t>(i)] &&
                       params_[static_cast<size_t>(i)].requires_grad();
    if (!valid)
      throw Error(
          fmt::format("the checkpoint's gradient bucket layout names parameter {}, which this "
                      "model has not (or twice)",
                      i));
    seen[static_cast<size_t>(i)] = true;
    layout.push_back(static_cast<size_t>(i));
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].requires_grad() && !seen[i])
      throw Error(fmt::format("the checkpoint's gradient bucket layout leaves out parameter {} of this model", i));
  build_buckets(layout);
  rebuilt_ = true;
}

at::Tensor GradReducer::grad_view(size_t param) const {
  TORCH_INTERNAL_ASSERT(param < params_.size() && bucket_of_[param] >= 0, "parameter ", param,
                        " is in no gradient bucket");
  return buckets_[static_cast<size_t>(bucket_of_[param])].grad_views[static_cast<size_t>(index_in_[param])];
}

at::Tensor GradReducer::grad_norm_squared() const {
  if (buckets_.empty()) return torch::zeros({});
  // dot() reduces in place (BLAS on CPU); pow(2).sum() would allocate a bucket-sized temporary.
  at::Tensor total;
  for (const auto& b : buckets_) total = total.defined() ? total + b.grads.dot(b.grads) : b.grads.dot(b.grads);
  return total;
}

at::Tensor mean_grad_norm_squared(const at::Tensor& reduced_sq, config::Reduce reduce, int replicas) {
  if (reduce == config::Reduce::kMean) return reduced_sq;
  return reduced_sq / (static_cast<double>(replicas) * replicas);
}

int64_t GradReducer::payload_bytes() const {
  int64_t bytes = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) bytes += hook_->payload_bytes(bucket_view(b));
  return bytes;
}

void GradReducer::reset_received() { received_.assign(params_.size(), false); }

void GradReducer::note_replayed_step() {
  TORCH_INTERNAL_ASSERT(!reducing(), "a replayed step cannot hold the all-reduces of a process group");
  for (size_t i = 0; i < params_.size(); ++i) received_[i] = received_[i] || used_[i];
  ++steps_;
}

}  // namespace ddplab::distributed
