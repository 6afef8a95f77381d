#include "ddplab/train/run_writer.h"

#include "ddplab/rundir/layout.h"
#include "ddplab/train/epoch_model.h"

namespace ddplab::train {

RunWriter::RunWriter(std::filesystem::path run_dir, bool lead, std::shared_ptr<TrainObserver> observer)
    : run_dir_(std::move(run_dir)), observer_(std::move(observer)) {
  if (lead) run_ = rundir::RunLog::open(run_dir_);
}

void RunWriter::note(const std::string& text) const {
  if (lead()) observer_->on_note(text);
}

void RunWriter::update_manifest(const nlohmann::json& fields) const {
  if (lead()) run_->update_manifest(fields);
}

void RunWriter::append(const std::vector<rundir::StepRecord>& steps) const {
  if (lead()) run_->append_steps(steps);
}

void RunWriter::append(const rundir::EpochRecord& rec) const {
  if (!lead()) return;
  run_->append(rec);
  observer_->on_epoch(rec);
}

void RunWriter::save_module(const std::filesystem::path& file, torch::nn::Module& model, EpochModel* evaluated) const {
  if (!lead()) return;
  if (evaluated == nullptr) return train::save_module(file, model);
  evaluated->with_evaluated([&] { train::save_module(file, model); });
}

void RunWriter::save_model(torch::nn::Module& model) const {
  if (!lead()) return;
  model.to(torch::kCPU);
  train::save_module(rundir::model_file(run_dir_), model);
}

void RunWriter::save_checkpoint(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                const CheckpointState& state) const {
  if (!lead()) return;
  train::save_checkpoint(rundir::checkpoint_file(run_dir_), model, optimizer, state);
  const rundir::CheckpointMark mark{state.epochs_done, state.step_in_epoch, state.global_step, state.records,
                                    rundir::utc_now()};
  run_->update_manifest({{"checkpoint", mark.to_json()}});
}

}  // namespace ddplab::train
