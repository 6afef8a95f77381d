// Selection on the validation split (dataset.validation, data/validation.h): which epoch is the
// best so far by early_stop.metric, and whether training stops early, as Keras' EarlyStopping
// and Lightning's EarlyStopping and ModelCheckpoint(save_top_k=1) decide.
//
// An epoch improves on the best when its metric beats the best by more than early_stop.min_delta
// (val_loss lower, val_acc higher); the first epoch always does. With early_stop.patience P > 0,
// training stops after an epoch that is the P-th in a row without improving. Every rank reads the
// same all-reduced record, so every rank decides alike without a collective of its own.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ddplab/config/spec.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::train {

class EarlyStop {
 public:
  explicit EarlyStop(const config::EarlyStopSpec& spec) : spec_(spec) {}

  // Feeds epoch record `rec` (which must hold the metric); true when it is the new best.
  bool improved(const rundir::EpochRecord& rec);
  // After the epochs fed so far: has patience run out?
  bool should_stop(int64_t epochs_done) const;

  // The best epoch (1-based) and its metric; nullopt before the first. A checkpoint keeps them.
  std::optional<int64_t> best_epoch() const { return best_epoch_; }
  double best() const { return best_; }
  void restore(int64_t best_epoch, double best);

  // Patience ran out after `epochs_done` epochs: the manifest's "early_stop" entry (epochs_done,
  // best_epoch, metric, best) and the one-line note that says why the run has fewer epochs.
  nlohmann::json manifest_entry(int64_t epochs_done) const;
  std::string note(int64_t epochs_done) const;

 private:
  double metric_of(const rundir::EpochRecord& rec) const;

  const config::EarlyStopSpec& spec_;
  std::optional<int64_t> best_epoch_;
  double best_ = 0;
};

}  // namespace ddplab::train
