#include "ddplab/plan/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/report/stats.h"

namespace ddplab::plan {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMinSeconds = 1e-9;

double mean_of(const std::vector<double>& xs) {
  return xs.empty() ? kNaN : std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

// Non-negative least squares of y on the columns u and v (no intercept); v empty: y on u alone.
std::pair<double, double> nonnegative_fit(const std::vector<double>& u, const std::vector<double>& v,
                                          const std::vector<double>& y) {
  const auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
  };
  const double uu = dot(u, u), uy = dot(u, y);
  const double alone = uu > 0 ? std::max(0.0, uy / uu) : 0.0;
  if (v.empty()) return {alone, 0.0};
  const double vv = dot(v, v), uv = dot(u, v), vy = dot(v, y), det = uu * vv - uv * uv;
  if (det > 1e-12 * uu * vv) {
    const double a = (uy * vv - vy * uv) / det, b = (vy * uu - uy * uv) / det;
    if (a >= 0 && b >= 0) return {a, b};
  }
  // A negative coefficient: the better of the two one-column fits.
  const double v_alone = vv > 0 ? std::max(0.0, vy / vv) : 0.0;
  double err_u = 0, err_v = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    err_u += std::pow(y[i] - alone * u[i], 2);
    err_v += std::pow(y[i] - v_alone * v[i], 2);
  }
  return err_u <= err_v ? std::pair<double, double>{alone, 0.0} : std::pair<double, double>{0.0, v_alone};
}

[[noreturn]] void throw_too_few_batches(const std::vector<StepTiming>& timings) {
  std::set<std::string> seen;
  for (const auto& t : timings) seen.insert(fmt::format("{} x {}", t.replicas, t.per_replica_batch));
  throw Error(fmt::format(
      "step-time model: needs timings at 2 or more per-replica batches of one replica count to draw the compute "
      "time against the batch; the calibration has {}",
      seen.empty() ? std::string("none") : fmt::format("only {}", fmt::join(seen, ", "))));
}

std::map<int, ComputeCurve> fit_compute_per_replicas(const std::vector<StepTiming>& timings) {
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_n;
  for (const auto& t : timings) {
    by_n[t.replicas].first.push_back(t.per_replica_batch);
    by_n[t.replicas].second.push_back(t.step_s - t.comm_wait_s);
  }
  std::map<int, ComputeCurve> out;
  for (const auto& [n, xy] : by_n)
    if (const auto fit = fit_compute(xy.first, xy.second)) out[n] = *fit;
  if (out.empty()) throw_too_few_batches(timings);
  return out;
}

// A replica count timed at one per-replica batch only: the nearest fitted curve, scaled to its
// measured compute time (on a shared CPU the cores split among the replicas change the speed).
void scale_single_batch_counts(const std::vector<StepTiming>& timings, StepTimeModel& m) {
  std::map<int, std::pair<double, double>> sums;  // n -> (measured compute, the nearest line's)
  for (const auto& t : timings) {
    if (m.compute.count(t.replicas)) continue;
    sums[t.replicas].first += t.step_s - t.comm_wait_s;
    sums[t.replicas].second += m.compute_at(t.replicas).at(t.per_replica_batch);
  }
  for (const auto& [n, s] : sums) {
    if (!(s.first > 0) || !(s.second > 0)) continue;
    m.compute[n] = m.compute_at(n).scaled(s.first / s.second);
    m.compute_scaled.insert(n);
  }
}

// The squared log error of the model's step times over `timings`.
double squared_log_error(const StepTimeModel& m, const std::vector<StepTiming>& timings) {
  double err = 0;
  for (const auto& t : timings) err += std::pow(std::log(m.step_s(t.replicas, t.per_replica_batch) / t.step_s), 2);
  return err;
}

// For overlap g: the communication fit (unless measured) and its squared log error over `timings`.
double fit_comm_at(StepTimeModel& m, const std::vector<StepTiming>& timings) {
  if (m.comm_measured) return squared_log_error(m, timings);
  std::vector<double> u, v, y;
  std::set<int> counts;
  for (const auto& t : timings) {
    if (t.replicas < 2) continue;
    const double comp = m.compute_s(t.replicas, t.per_replica_batch);
    const double implied =
        std::pow(std::max(0.0, std::pow(t.step_s, m.overlap) - std::pow(comp, m.overlap)), 1 / m.overlap);
    u.push_back(ring_factor(t.replicas) * m.payload_bytes);
    v.push_back(m.buckets);
    y.push_back(implied);
    counts.insert(t.replicas);
  }
  m.latency_fitted = counts.size() >= 2;
  const auto [spb, lat] = nonnegative_fit(u, m.latency_fitted ? v : std::vector<double>{}, y);
  m.seconds_per_byte = spb;
  m.latency_s = lat;
  return squared_log_error(m, timings);
}
}  // namespace

double ComputeCurve::at(double b) const {
  TORCH_INTERNAL_ASSERT(points.size() >= 2);
  size_t i = 1;  // the segment (i - 1, i) that holds b, or the end segment beyond it
  while (i + 1 < points.size() && b > points[i].first) ++i;
  const auto& [b0, t0] = points[i - 1];
  const auto& [b1, t1] = points[i];
  return t0 + (t1 - t0) * (b - b0) / (b1 - b0);
}

ComputeCurve ComputeCurve::scaled(double factor) const {
  ComputeCurve out = *this;
  for (auto& p : out.points) p.second *= factor;
  return out;
}

std::optional<ComputeCurve> fit_compute(const std::vector<double>& batch, const std::vector<double>& seconds) {
  std::map<double, std::vector<double>> by_batch;
  for (size_t i = 0; i < batch.size() && i < seconds.size(); ++i)
    if (std::isfinite(batch[i]) && std::isfinite(seconds[i])) by_batch[batch[i]].push_back(seconds[i]);
  if (by_batch.size() < 2) return std::nullopt;
  ComputeCurve curve;
  for (const auto& [b, ts] : by_batch) curve.points.emplace_back(b, report::percentile(ts, 0.5));
  return curve;
}

double ring_factor(int replicas) { return replicas < 2 ? 0.0 : 2.0 * (replicas - 1) / replicas; }

const ComputeCurve& StepTimeModel::compute_at(int replicas) const {
  TORCH_INTERNAL_ASSERT(!compute.empty());
  auto best = compute.begin();
  for (auto it = compute.begin(); it != compute.end(); ++it)
    if (std::abs(it->first - replicas) < std::abs(best->first - replicas)) best = it;
  return best->second;
}

double StepTimeModel::compute_s(int replicas, double per_replica_batch) const {
  return std::max(kMinSeconds, compute_at(replicas).at(per_replica_batch));
}

double StepTimeModel::comm_s(int replicas) const {
  if (replicas < 2) return 0;
  return ring_factor(replicas) * payload_bytes * seconds_per_byte + buckets * latency_s;
}

double StepTimeModel::step_s(int replicas, double per_replica_batch) const {
  const double comp = compute_s(replicas, per_replica_batch), comm = comm_s(replicas);
  if (comm <= 0) return comp;
  // (a^g + b^g)^(1/g) scaled by the larger term, so that g = 10 does not overflow.
  const double top = std::max(comp, comm);
  return top * std::pow(std::pow(comp / top, overlap) + std::pow(comm / top, overlap), 1 / overlap);
}

double StepTimeModel::exposed_comm_s(int replicas, double per_replica_batch) const {
  return step_s(replicas, per_replica_batch) - compute_s(replicas, per_replica_batch);
}

StepTimeModel fit_step_time(const std::vector<StepTiming>& timings, double payload_bytes, int buckets,
                            const std::optional<CommFit>& measured) {
  StepTimeModel m;
  m.compute = fit_compute_per_replicas(timings);
  scale_single_batch_counts(timings, m);
  m.payload_bytes = payload_bytes;
  m.buckets = std::max(1, buckets);
  const bool any_comm = std::any_of(timings.begin(), timings.end(), [](const StepTiming& t) { return t.replicas > 1; });
  if (measured && any_comm && payload_bytes > 0) {
    m.comm_measured = true;
    m.seconds_per_byte = measured->seconds_per_byte;
    m.latency_s = measured->latency_s;
  }
  double best_err = std::numeric_limits<double>::infinity(), best_g = 1;
  if (any_comm && payload_bytes > 0) {
    const int n = static_cast<int>(std::lround((kOverlapMax - kOverlapMin) / kOverlapStep));
    for (int i = 0; i <= n; ++i) {
      m.overlap = kOverlapMin + i * kOverlapStep;
      const double err = fit_comm_at(m, timings);
      if (err < best_err - 1e-15) {
        best_err = err;
        best_g = m.overlap;
      }
    }
  }
  m.overlap = best_g;
  if (any_comm && payload_bytes > 0) fit_comm_at(m, timings);
  m.log_rms = timings.empty() ? kNaN : std::sqrt(squared_log_error(m, timings) / static_cast<double>(timings.size()));
  return m;
}

std::optional<CommFit> fit_allreduce(const std::vector<ProbePoint>& points) {
  std::vector<double> u, v, y;
  std::set<double> sizes;
  for (const auto& p : points) {
    if (p.replicas < 2 || !(p.seconds > 0) || !(p.bytes > 0)) continue;
    // Each row divided by its time: relative errors, so that the small sizes, which carry the
    // latency, weigh as much as the large ones, which carry the bandwidth.
    u.push_back(ring_factor(p.replicas) * p.bytes / p.seconds);
    v.push_back(1 / p.seconds);
    y.push_back(1);
    sizes.insert(p.bytes);
  }
  if (sizes.size() < 2) return std::nullopt;
  const auto [spb, latency] = nonnegative_fit(u, v, y);
  return CommFit{spb, latency};
}

int bucket_count(double payload_bytes, double bucket_mb) {
  constexpr double kMiB = 1024.0 * 1024.0, kFirstBucket = kMiB;
  if (payload_bytes <= kFirstBucket) return 1;
  return 1 + static_cast<int>(std::ceil((payload_bytes - kFirstBucket) / (std::max(bucket_mb, 1e-6) * kMiB)));
}

double noise_scale_steps(const std::vector<ProgressSpan>& reference, double reference_batch, double batch) {
  double steps = 0;
  for (const auto& s : reference)
    steps += s.steps * (1 + s.noise_scale / batch) / (1 + s.noise_scale / reference_batch);
  return steps;
}

int64_t evaluations_to_target(double steps, int64_t steps_per_epoch, bool loss_target) {
  TORCH_INTERNAL_ASSERT(steps_per_epoch > 0);
  if (!std::isfinite(steps) || steps <= 0) return 0;
  const auto n = static_cast<int64_t>(std::ceil(steps * (1 - 1e-9)));
  return loss_target ? (n - 1) / steps_per_epoch : (n + steps_per_epoch - 1) / steps_per_epoch;
}

double time_to_target(double steps, double step_s, double evaluations, double eval_s, double startup_s) {
  return steps * step_s + evaluations * eval_s + startup_s;
}

namespace {
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2) + 1;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return kNaN;
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double mx = mean_of(rx), my = mean_of(ry);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : kNaN;
}

}  // namespace ddplab::plan
