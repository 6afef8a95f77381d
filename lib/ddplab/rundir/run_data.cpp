#include "ddplab/rundir/run_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ddplab/config/defaults.h"
#include "ddplab/rundir/health.h"

namespace ddplab::rundir {
using nlohmann::json;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

std::string RunData::status_text() const { return running() ? "in progress" : status_name; }

int RunData::replicas() const {
  if (!epochs.empty()) return epochs.back().replicas;
  if (spec.is_object() && spec.contains("replicas") && spec["replicas"].is_object())
    return spec["replicas"].value("count", 1);
  return 1;
}

int64_t RunData::per_replica_batch() const {
  if (epochs.empty() || epochs.back().replicas <= 0) return 0;
  return epochs.back().global_batch / epochs.back().replicas;
}

double RunData::final_test_acc() const { return epochs.empty() ? kNaN : epochs.back().test_acc; }
double RunData::final_train_loss() const { return epochs.empty() ? kNaN : epochs.back().train_loss; }
double RunData::final_test_loss() const { return epochs.empty() ? kNaN : epochs.back().test_loss; }

double selection_acc(const EpochRecord& e, bool on_validation) {
  return on_validation ? or_nan(e.val_acc) : e.test_acc;
}

const EpochRecord* RunData::best_epoch(bool on_validation) const {
  const EpochRecord* best = nullptr;
  for (const auto& e : epochs)
    if (std::isfinite(selection_acc(e, on_validation)) &&
        (!best || selection_acc(e, on_validation) > selection_acc(*best, on_validation)))
      best = &e;
  return best;
}

double RunData::best_test_acc() const {
  const EpochRecord* best = best_epoch(false);
  return best ? best->test_acc : kNaN;
}

double RunData::final_test_acc_points(int k) const {
  if (epochs.empty()) return kNaN;
  const size_t n = std::min(epochs.size(), static_cast<size_t>(std::max(k, 1)));
  double sum = 0;
  for (size_t i = epochs.size() - n; i < epochs.size(); ++i) sum += epochs[i].test_acc;
  return 100 * sum / static_cast<double>(n);
}

namespace {
// The mean over `epochs` of the finite values of `field`.
template <typename Field>
double mean_over_epochs(const std::vector<EpochRecord>& epochs, const Field& field) {
  std::vector<double> xs;
  for (const auto& e : epochs)
    if (std::isfinite(field(e))) xs.push_back(field(e));
  return xs.empty() ? kNaN : std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}
}  // namespace

double RunData::mean_images_per_s() const {
  return mean_over_epochs(epochs, [](const EpochRecord& e) { return e.images_per_s; });
}
double RunData::mean_host_cpu_wait_pct() const {
  return mean_over_epochs(epochs, [](const EpochRecord& e) { return or_nan(e.host_cpu_wait_pct); });
}
double RunData::mean_host_steal_pct() const {
  return mean_over_epochs(epochs, [](const EpochRecord& e) { return or_nan(e.host_steal_pct); });
}

int RunData::classes() const {
  const bool named = spec.is_object() && spec.contains("dataset") && spec["dataset"].is_object();
  const auto dataset = config::dataset_of(named ? spec["dataset"].value("name", json()) : json());
  return static_cast<int>(dataset ? config::known_classes(*dataset).value_or(10) : 10);
}

std::optional<RunHealth> RunData::health() const {
  if (status == RunStatus::kDiverged) return RunHealth::kDiverged;
  if (!finished() || epochs.empty()) return std::nullopt;
  if (!std::isfinite(epochs.back().train_loss)) return RunHealth::kDiverged;
  const auto failed = failed_ending(epochs, classes());
  if (!failed) return status == RunStatus::kCollapsed ? RunHealth::kCollapsed : RunHealth::kOk;
  return failed->status == RunStatus::kDiverged ? RunHealth::kDiverged : RunHealth::kCollapsed;
}

bool RunData::poor() const { return health() == RunHealth::kOk && ended_poor(epochs.back(), classes()); }

const EpochRecord* RunData::first_reaching(double target, bool on_validation) const {
  for (const auto& e : epochs)
    if (selection_acc(e, on_validation) >= target) return &e;
  return nullptr;
}

bool RunData::has_eval_points(bool on_validation) const {
  if (!step_eval.is_object() || step_eval.value("set", json()) != (on_validation ? "validation" : "test")) return false;
  return std::any_of(steps.begin(), steps.end(), [](const StepRecord& r) { return r.eval_acc.has_value(); });
}

std::optional<TargetPoint> RunData::reaching(double target, bool on_validation) const {
  if (has_eval_points(on_validation)) {
    for (const auto& r : steps)
      if (r.eval_acc && *r.eval_acc >= target)
        return TargetPoint{r.epoch, r.step, static_cast<double>(r.samples), r.elapsed_s, replicas(), true};
    return std::nullopt;
  }
  const EpochRecord* e = first_reaching(target, on_validation);
  if (!e) return std::nullopt;
  return TargetPoint{static_cast<double>(e->epoch),
                     e->step,
                     static_cast<double>(e->step) * static_cast<double>(e->global_batch),
                     e->wall_s,
                     e->replicas,
                     false};
}

namespace {
// The training loss of record `i` of `steps`, averaged over the records' samples within
// kLossWindowSamples centred on record i's middle sample (a record counts with its overlap).
double windowed_loss(const std::vector<StepRecord>& steps, size_t i) {
  auto span = [&](size_t j) {  // the samples record j covers, [first, last)
    const double last = static_cast<double>(steps[j].samples);
    const double first = j > 0 ? static_cast<double>(steps[j - 1].samples) : 0.0;
    return std::pair<double, double>{first, last};
  };
  const auto [first, last] = span(i);
  const double lo = (first + last) / 2 - kLossWindowSamples / 2, hi = lo + kLossWindowSamples;
  double weight = 0, sum = 0;
  // Records are in sample order: start at the first one that ends after lo.
  const auto begin = std::partition_point(steps.begin(), steps.end(),
                                          [&](const StepRecord& r) { return static_cast<double>(r.samples) <= lo; });
  for (auto j = static_cast<size_t>(begin - steps.begin()); j < steps.size() && span(j).first < hi; ++j) {
    const auto [a, b] = span(j);
    const double overlap = std::min(b, hi) - std::max(a, lo);
    if (overlap <= 0 || !std::isfinite(steps[j].train_loss)) continue;
    weight += overlap;
    sum += overlap * steps[j].train_loss;
  }
  return weight > 0 ? sum / weight : kNaN;
}
}  // namespace

const StepRecord* RunData::steps_to_loss(double target_loss) const {
  const StepRecord* reached = nullptr;
  for (size_t i = steps.size(); i-- > 0;) {
    if (!(windowed_loss(steps, i) <= target_loss)) break;
    reached = &steps[i];
  }
  return reached;
}

}  // namespace ddplab::rundir
