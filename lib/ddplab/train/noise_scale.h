// The gradient noise scale of McCandlish et al. 2018 ("An Empirical Model of Large-Batch
// Training", App. A), measured for free from data-parallel replicas.
//
// Every all-reduced step yields two gradient norms at two batch sizes: each replica's local
// gradient (B_small = the per-replica batch; |G_small|^2 is the mean over replicas of the local
// squared norms, which GradReducer averages in its last bucket) and the all-reduced gradient
// (B_big = the global batch; |G_big|^2). Since E|G_B|^2 = |G|^2 + tr(Sigma) / B, the unbiased
// per-step estimates are
//
//   |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
//   S     ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)        (S estimates tr(Sigma))
//
// Single steps are very noisy (either may be negative), so S and |G|^2 are averaged separately
// over steps by exponential moving averages (decay `decay` per step, 0.99 by default: about the
// last 100 steps weigh most) with Adam's bias correction (divided by 1 - decay^t, so the first
// steps are not pulled toward 0), and only then divided: B_simple = EMA(S) / EMA(|G|^2), in
// samples. B_simple approximates B_noise, the batch size at which the steps to a given loss are
// twice the minimum (steps ~ S_min (1 + B_noise / B)).
//
// update() takes 0-dim tensors and computes on the device: no host synchronization per step;
// read the values (host syncs) at the end of an epoch.
#pragma once
#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace ddplab::train {

struct NoiseScaleOptions {
  double decay = 0.99;  // EMA decay per step, in [0, 1)
};

// The unbiased per-step estimates from the squared norms at two batch sizes (b_small < b_big).
struct NoiseScaleStep {
  double trace = 0;    // S, estimate of tr(Sigma)
  double grad_sq = 0;  // estimate of |G|^2
};
NoiseScaleStep noise_scale_step(double small_sq, double big_sq, int64_t b_small, int64_t b_big);

class GradNoiseScale {
 public:
  // b_small: per-replica batch; b_big: global batch. With b_big <= b_small nothing is measured
  // (one replica): available() stays false.
  GradNoiseScale(int64_t b_small, int64_t b_big, NoiseScaleOptions options = {});

  bool measurable() const { return b_big_ > b_small_; }
  // One step: small_sq = mean over replicas of |local gradient|^2, big_sq = |mean gradient|^2
  // (0-dim tensors of any floating dtype and device; computed in float64 on that device).
  void update(const at::Tensor& small_sq, const at::Tensor& big_sq);

  int64_t steps() const { return steps_; }
  bool available() const { return steps_ > 0; }
  // Bias-corrected EMAs (host reads; nullopt before the first update).
  std::optional<double> trace_ema() const;
  std::optional<double> grad_sq_ema() const;
  // trace_ema / grad_sq_ema; nullopt before the first update or while grad_sq_ema <= 0.
  std::optional<double> b_simple() const;

  // Raw (uncorrected) EMA state, for checkpoints: restore with set_state().
  double raw_trace() const;
  double raw_grad_sq() const;
  void set_state(double raw_trace, double raw_grad_sq, int64_t steps);

 private:
  double correction() const;

  int64_t b_small_, b_big_;
  NoiseScaleOptions options_;
  at::Tensor trace_, grad_sq_;  // float64 0-dim, uncorrected EMAs; undefined before the first update
  int64_t steps_ = 0;
};

}  // namespace ddplab::train
