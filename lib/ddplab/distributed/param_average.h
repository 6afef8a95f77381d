// Parameter averaging across replicas, for the syncs that talk less often than every step
// (replicas.sync): post-local SGD (Lin et al. 2020, "Don't Use Large Mini-Batches, Use Local
// SGD"; torch's PeriodicModelAverager) and elastic averaging SGD (Zhang, Choromanska & LeCun
// 2015, synchronous EASGD).
//
// average() and elastic_step() are one all-reduce each, of a flat copy of the parameters plus two
// control slots: a rank that wants to stop (SIGINT/SIGTERM, debug fault stop) sets the first, a
// rank whose local gradient norm was NaN or Inf since the last agreement sets the second, and
// every rank learns both from the result, so between gradient all-reduces stops and divergences
// are agreed at averaging points (as GradReducer's last bucket agrees stops at every step).
// Optimizer state is never touched: it stays local.
//
// Without a Comm (one replica) the same arithmetic runs over one replica (average() leaves the
// parameters as they are). The parameters must share one dtype and device.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ddplab/distributed/agreement.h"
#include "ddplab/distributed/comm.h"

namespace ddplab::distributed {

class ParamAverager {
 public:
  // `params` are updated in place. The EASGD center starts as a copy of them: construct after
  // the initial broadcast, so it is identical on every rank.
  ParamAverager(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm);

  int replicas() const { return comm_ ? comm_->size : 1; }

  // A rank brings its Agreement (agreement.h) to an averaging point; the one returned is what all
  // agreed: each field is true on every rank if any rank passed it true.
  // x_r <- mean over replicas of x_r (divided by N, then summed, as torch's average_parameters).
  Agreement average(Agreement local);
  // EASGD: with d_r = x_r - c, x_r <- x_r - alpha d_r and c <- c + alpha sum_r d_r. The center c
  // stays identical on every rank (every rank adds the same all-reduced sum).
  Agreement elastic_step(double alpha, Agreement local);

  // The EASGD center variable, one tensor per parameter (same shapes).
  const std::vector<at::Tensor>& center() const { return center_; }
  // Replaces the center (resume from a checkpoint); shapes must match.
  void set_center(const std::vector<at::Tensor>& center);
  // Bytes in the all-reduce of one average() or elastic_step(): parameters + control slots.
  int64_t payload_bytes() const { return flat_.numel() * flat_.element_size(); }

  // Diagnostics, not training traffic: the replicas' mean parameters (one tensor per parameter,
  // in the parameters' dtype) and drift = sqrt(mean_r |x_r - mean|^2) / |mean| (0 for one replica
  // or a zero mean). Two all-reduces (the parameters in float64 and one scalar); every rank calls it.
  struct Spread {
    std::vector<at::Tensor> mean;
    double drift = 0;
  };
  Spread spread() const;

 private:
  ControlSlots slots_{{/*diverged=*/true, /*local_norm=*/false}};  // after the parameters
  // Copies `parts` (shaped like the parameters) into flat_ and sets the control slots.
  void fill(const std::vector<at::Tensor>& parts, Agreement local);
  Agreement allreduce_and_read_agreement();

  std::vector<at::Tensor> params_;
  std::shared_ptr<Comm> comm_;
  std::vector<at::Tensor> center_;
  at::Tensor flat_;  // numel(params) + the control slots
};

}  // namespace ddplab::distributed
