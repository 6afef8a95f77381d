#include "ddplab/runner/scheduler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/config/datasets.h"

namespace ddplab::runner {

using config::Device;
using config::ReplicaMode;

Needs needs_of(const config::ExperimentSpec& spec) {
  const bool simulated = spec.replicas.mode == ReplicaMode::kSimulated;
  const int processes = simulated ? 1 : spec.replicas.count;
  if (spec.replicas.device == Device::kCuda) return Needs{0, processes};
  return Needs{processes * spec.replicas.threads, 0};
}

std::string describe_needs(const config::ExperimentSpec& spec) {
  const Needs n = needs_of(spec);
  const bool simulated = spec.replicas.mode == ReplicaMode::kSimulated;
  if (n.gpus > 0)
    return simulated ? "1 GPU (simulated replicas, device cuda)"
                     : fmt::format("{} GPU{} (replicas.count {}, device cuda)", n.gpus, n.gpus == 1 ? "" : "s",
                                   spec.replicas.count);
  if (simulated)
    return fmt::format("{} core{} (simulated replicas, replicas.threads {})", n.cores, n.cores == 1 ? "" : "s",
                       spec.replicas.threads);
  return fmt::format("{} core{} (replicas.count {} x replicas.threads {})", n.cores, n.cores == 1 ? "" : "s",
                     spec.replicas.count, spec.replicas.threads);
}

double work_estimate(const config::ExperimentSpec& spec) {
  const int64_t full = config::dataset_info(spec.dataset.name).train_size;
  const int64_t samples = spec.dataset.train_limit > 0 ? std::min(spec.dataset.train_limit, full) : full;
  const Needs n = needs_of(spec);
  const int units = std::max(1, n.gpus > 0 ? n.gpus : n.cores);
  return static_cast<double>(spec.epochs) * static_cast<double>(samples) / static_cast<double>(units);
}

std::vector<size_t> longest_first(const std::vector<double>& estimates, const std::vector<Needs>& needs,
                                  std::vector<size_t> ties) {
  TORCH_INTERNAL_ASSERT(estimates.size() == needs.size());
  std::vector<size_t> order = std::move(ties);
  if (order.empty()) {
    order.resize(estimates.size());
    std::iota(order.begin(), order.end(), size_t{0});
  }
  TORCH_INTERNAL_ASSERT(order.size() == estimates.size());
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (estimates[a] != estimates[b]) return estimates[a] > estimates[b];
    return needs[a].cores + needs[a].gpus > needs[b].cores + needs[b].gpus;
  });
  return order;
}

std::vector<std::string> visible_gpus(const char* cuda_visible_devices, int device_count) {
  std::vector<std::string> out;
  if (cuda_visible_devices != nullptr) {
    std::string item;
    for (const char* c = cuda_visible_devices;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!item.empty()) out.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else if (*c != ' ') {
        item += *c;
      }
    }
    return out;
  }
  for (int i = 0; i < device_count; ++i) out.push_back(fmt::format("{}", i));
  return out;
}

Budget budget_of(const PackOptions& o, int machine_cores, const std::vector<std::string>& visible) {
  if (o.jobs < 0) throw Error(fmt::format("--jobs: must be at least 1, got {}", o.jobs));
  if (o.cores < 0) throw Error(fmt::format("--cores: must be at least 1, got {}", o.cores));
  if (o.gpus > static_cast<int>(visible.size()))
    throw Error(fmt::format("--gpus: {} asked for, but {} GPU{} visible{}", o.gpus, visible.size(),
                            visible.size() == 1 ? " is" : "s are",
                            visible.empty() ? "" : fmt::format(" ({})", fmt::join(visible, ","))));
  Budget b;
  b.jobs = o.jobs;
  b.cores = o.cores > 0 ? o.cores : std::max(1, machine_cores);
  const size_t gpus = o.gpus >= 0 ? static_cast<size_t>(o.gpus) : visible.size();
  b.gpus.assign(visible.begin(), visible.begin() + static_cast<std::ptrdiff_t>(gpus));
  return b;
}

void check_fits(const std::string& run_id, const config::ExperimentSpec& spec, const Budget& budget) {
  const Needs n = needs_of(spec);
  if (n.cores > budget.cores)
    throw Error(
        fmt::format("run {} needs {}, more than the budget's {} core{} (--cores, default: the machine's "
                    "cores); give --cores {} or more, or fewer replicas.threads",
                    run_id, describe_needs(spec), budget.cores, budget.cores == 1 ? "" : "s", n.cores));
  const int gpus = static_cast<int>(budget.gpus.size());
  if (n.gpus > gpus)
    throw Error(
        fmt::format("run {} needs {}, more than the budget's {} GPU{} (--gpus, default: the visible GPUs); "
                    "run it on a machine with {} GPUs or more",
                    run_id, describe_needs(spec), gpus, gpus == 1 ? "" : "s", n.gpus));
}

Pool::Pool(Budget budget)
    : budget_(std::move(budget)), free_cores_(budget_.cores), gpu_free_(budget_.gpus.size(), true) {}

std::optional<Allocation> Pool::take(const Needs& needs) {
  if (budget_.jobs > 0 && running_ >= budget_.jobs) return std::nullopt;
  const auto free_gpus = static_cast<int>(std::count(gpu_free_.begin(), gpu_free_.end(), true));
  if (needs.cores > free_cores_ || needs.gpus > free_gpus) return std::nullopt;
  Allocation a;
  a.cores = needs.cores;
  for (size_t g = 0; g < gpu_free_.size() && static_cast<int>(a.gpus.size()) < needs.gpus; ++g) {
    if (!gpu_free_[g]) continue;
    gpu_free_[g] = false;
    a.gpus.push_back(budget_.gpus[g]);
  }
  free_cores_ -= needs.cores;
  ++running_;
  return a;
}

void Pool::give_back(const Allocation& a) {
  free_cores_ += a.cores;
  for (const auto& id : a.gpus)
    for (size_t g = 0; g < gpu_free_.size(); ++g)
      if (budget_.gpus[g] == id) gpu_free_[g] = true;
  --running_;
  TORCH_INTERNAL_ASSERT(running_ >= 0 && free_cores_ <= budget_.cores);
}

std::optional<std::pair<size_t, Allocation>> start_next(const std::vector<size_t>& order,
                                                        const std::vector<bool>& pending,
                                                        const std::vector<Needs>& needs, Pool& pool) {
  for (size_t i : order) {
    if (!pending[i]) continue;
    if (auto a = pool.take(needs[i])) return std::make_pair(i, *a);
  }
  return std::nullopt;
}

double busy_percent(double used, int units, double wall_s) {
  if (units <= 0 || wall_s <= 0) return 0;
  return 100.0 * used / (static_cast<double>(units) * wall_s);
}

}  // namespace ddplab::runner
