// Every write of a training run to its run directory (records, manifest entries, checkpoint.pt,
// best.pt, model.pt) and every note to the user goes through the RunWriter: on rank 0 it writes and
// tells the observer; on every other rank each call does nothing. So neither the Trainer's loop
// nor a part (part.h) asks which rank it is on.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "ddplab/rundir/run_log.h"
#include "ddplab/train/checkpoint.h"
#include "ddplab/train/observer.h"

namespace ddplab::train {

class EpochModel;

class RunWriter {
 public:
  // `lead`: this rank writes (rank 0), which opens the run log of `run_dir` (it must exist).
  RunWriter(std::filesystem::path run_dir, bool lead, std::shared_ptr<TrainObserver> observer);

  bool lead() const { return run_.has_value(); }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  // Every rank's observer, for on_step (observer.h).
  TrainObserver& observer() const { return *observer_; }

  void note(const std::string& text) const;
  void update_manifest(const nlohmann::json& fields) const;
  void append(const std::vector<rundir::StepRecord>& steps) const;
  // The epoch's record into epochs.jsonl, then the observer's on_epoch.
  void append(const rundir::EpochRecord& rec) const;
  // `model` as torch::save writes it; with `evaluated`, with the weights it last evaluated.
  void save_module(const std::filesystem::path& file, torch::nn::Module& model, EpochModel* evaluated = nullptr) const;
  // model.pt: `model`, moved to the CPU first (training is over).
  void save_model(torch::nn::Module& model) const;
  // checkpoint.pt, then the manifest's "checkpoint" mark.
  void save_checkpoint(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                       const CheckpointState& state) const;

 private:
  std::filesystem::path run_dir_;
  std::optional<rundir::RunLog> run_;
  std::shared_ptr<TrainObserver> observer_;
};

}  // namespace ddplab::train
