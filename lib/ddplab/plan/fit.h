// The planner's two models, fitted on measurements (docs/planner.md; the formulas and their sources
// are in shared/reference.md, "Predicting time to target"). Pure arithmetic on numbers: reading run
// directories is calibration.h.
//
// Notation: N replicas, b per-replica batch, B = N b global batch.
//   step time  T_step(N, b) = (T_comp(b)^g + T_comm(N)^g)^(1/g)        (Pollux's overlap, g in [1, 10])
//              T_comp(b)    through the timed batches, linear between (per calibrated N)
//              T_comm(N)    = 2 (N - 1) / N * P s / bw + buckets * latency   (ring all-reduce; 0 at N = 1)
//   steps      S(B) = S_min (1 + B_crit / B)                         (McCandlish et al. 2018)
//   time       TTT(N, B) = S(B) T_step(N, B / N) + evaluations x eval_s + start-up
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ddplab::plan {

// One measured step time: N replicas at per-replica batch b (calibration.h reads it from the
// epoch records: epoch_s, comm_wait_s and comm_bytes over the epochs' steps).
struct StepTiming {
  int replicas = 1;
  double per_replica_batch = 0;
  double step_s = 0;       // training seconds per optimizer step
  double comm_wait_s = 0;  // of those, rank 0's seconds blocked on the gradient all-reduce (the exposed part)
};

// T_comp(b), compute seconds per step at per-replica batch b, through measured points: linear
// between neighbouring timed batches and along the end segments beyond them. Two batches give the
// line through them (alpha + beta b, Pollux's form); more follow the bends a line cannot (a cost
// per sample that changes with the batch as caches overflow, a GPU flat until the batch fills it;
// docs/planner.md).
struct ComputeCurve {
  std::vector<std::pair<double, double>> points;  // (b, seconds), by b, 2 or more distinct b
  double at(double b) const;                      // may be <= 0 far below the timed batches
  ComputeCurve scaled(double factor) const;       // every point's seconds times factor
};
// The curve through the median of `seconds` at each distinct `batch` (non-finite pairs skipped);
// nullopt with fewer than 2 distinct batches.
std::optional<ComputeCurve> fit_compute(const std::vector<double>& batch, const std::vector<double>& seconds);

// 2 (N - 1) / N: the share of the payload a ring all-reduce sends per rank.
double ring_factor(int replicas);

// The overlap exponents fit_step_time tries: 1 to 10 in steps of 0.01.
constexpr double kOverlapMin = 1, kOverlapMax = 10, kOverlapStep = 0.01;

// The communication constants of T_comm: seconds per byte (1 / bandwidth) and latency per all-reduce.
struct CommFit {
  double seconds_per_byte = 0;
  double latency_s = 0;
};

// One all-reduce timing of the probe (probe.h): `replicas` processes all-reducing `bytes`, the
// median seconds per all-reduce over the repetitions (the slowest rank's).
struct ProbePoint {
  int replicas = 2;
  double bytes = 0;
  double seconds = 0;
};
// seconds = 2 (N - 1) / N x bytes x seconds_per_byte + latency_s over `points` (every replica count
// together), by non-negative least squares of the relative errors (a 4 KiB all-reduce counts as
// much as a 16 MiB one); nullopt with fewer than 2 distinct sizes at 2+ replicas.
std::optional<CommFit> fit_allreduce(const std::vector<ProbePoint>& points);

struct StepTimeModel {
  std::map<int, ComputeCurve> compute;  // per calibrated replica count (at least one)
  // Replica counts timed at one per-replica batch only: their curve is the nearest fitted count's,
  // scaled by their measured compute time over that curve's at the same batch.
  std::set<int> compute_scaled;
  double payload_bytes = 0;     // P s: the gradient bytes one all-reduce carries
  int buckets = 1;              // all-reduces per step
  double seconds_per_byte = 0;  // 1 / bandwidth (0: no communication measured)
  double latency_s = 0;         // per bucket
  double overlap = 1;           // g
  // Whether bandwidth and latency were fitted apart (2+ replica counts above 1 calibrated);
  // else the whole communication time is put on bandwidth and latency_s is 0.
  bool latency_fitted = false;
  // Whether bandwidth and latency were measured by the all-reduce probe (probe.h) rather than
  // fitted from the step times; only the overlap g is then fitted.
  bool comm_measured = false;
  double log_rms = 0;  // root mean square of log(predicted / measured) step time over the calibration

  // The compute curve of the calibrated replica count nearest to `replicas` (the lower on a tie).
  const ComputeCurve& compute_at(int replicas) const;
  double compute_s(int replicas, double per_replica_batch) const;  // clamped at 1e-9 s
  double comm_s(int replicas) const;                               // 0 at 1 replica
  double step_s(int replicas, double per_replica_batch) const;
  // The predicted exposed communication, step_s - compute_s: what comm_wait_s measures.
  double exposed_comm_s(int replicas, double per_replica_batch) const;
};

// Fits the step-time model: T_comp per replica count from step_s - comm_wait_s (the part not
// blocked on communication) at 2+ per-replica batches of that count (a count timed at one batch:
// compute_scaled); then, for each overlap g of
// the grid above, the communication time each multi-replica timing implies, (T_step^g -
// T_comp^g)^(1/g), is fitted as x / bw + buckets * latency by non-negative least squares (x = ring
// bytes), and the g with the smallest squared log error of the predicted step times wins.
// With `measured` (the all-reduce probe's constants) bandwidth and latency are taken from it and
// only g is fitted (comm_measured).
// Throws ddplab::Error naming what is missing: no replica count with 2 distinct per-replica batches.
StepTimeModel fit_step_time(const std::vector<StepTiming>& timings, double payload_bytes, int buckets,
                            const std::optional<CommFit>& measured = std::nullopt);

// All-reduces per step for `payload_bytes` of gradients: DDP's first bucket closes at 1 MiB,
// the others at `bucket_mb` MiB.
int bucket_count(double payload_bytes, double bucket_mb);

// One stretch of a reference run's progress: `steps` steps at batch B0 during which the gradient
// noise scale was `noise_scale` (B_simple, in samples).
struct ProgressSpan {
  double steps = 0;
  double noise_scale = 0;
};
// The second steps estimate (AdaScale / Pollux's statistical efficiency): a step at batch B
// advances r(B) = (1 + phi / B0) / (1 + phi / B) reference steps, phi the noise scale at that point
// of progress, so the steps at B are sum over the spans of steps (1 + phi / B) / (1 + phi / B0).
// `reference` ends where the reference run reached the target.
double noise_scale_steps(const std::vector<ProgressSpan>& reference, double reference_batch, double batch);

// The evaluations a run spends before it reaches the target at `steps` (predicted, real-valued)
// with `steps_per_epoch` steps an epoch, counted in whole steps as a run reaches a target: at step
// n = ceil(steps), a value within 1e-9 (relative) above a whole number taken as it, so that the last
// bits of a fit never decide. A training-loss target is read from step records written before the
// epoch's evaluation: the evaluations of the epochs ended before step n, (n - 1) / steps_per_epoch.
// An accuracy target is read at an evaluation: that of the epoch holding step n too, ceil(n /
// steps_per_epoch). What calibration.h measures counts the same way.
int64_t evaluations_to_target(double steps, int64_t steps_per_epoch, bool loss_target);

// Time to target: steps x step time, plus `evaluations` evaluations of `eval_s` each, plus the
// start-up `startup_s`.
double time_to_target(double steps, double step_s, double evaluations, double eval_s, double startup_s);

// Spearman's rank correlation of x and y (ties get their mean rank); NaN with fewer than 2 pairs
// or when either has no spread.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace ddplab::plan
