// Fake run directories for the tests of the readers of run directories (report, tensorboard):
// spec.json, manifest.json, epochs.jsonl and steps.jsonl as rundir/run_log.h lays them out,
// without training.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddplab::testing {

struct FakeRun {
  std::string name = "exp";
  int replicas = 1;
  std::string scale_rule = "none";
  int per_replica = 64;
  int seed = 1;
  std::string status = "done";
  std::vector<double> test_acc = {0.5, 0.7, 0.8};
  double images_per_s = 100;
  std::string run_id;                                    // default: the sweep-style id
  std::vector<double> noise_scale;                       // grad_noise_scale per epoch (NaN: null); empty: field absent
  double comm_bytes = -1;                                // comm_bytes of every epoch; < 0: field absent
  int threads = 0;                                       // replicas.threads in spec.json; 0: absent
  std::vector<double> grad_sq;                           // gns_grad_sq_ema per epoch; empty: field absent
  nlohmann::json spec_patch = nlohmann::json::object();  // merged into spec.json (merge_patch)
  std::vector<nlohmann::json> steps;                     // lines of steps.jsonl; empty: no file
  nlohmann::json manifest_patch = nlohmann::json::object();  // merged into manifest.json (merge_patch)
  double host_cpu_wait_pct = -1;                             // of every epoch; < 0: field absent
  double wall_per_epoch = 12.0;                              // wall_s of epoch k is k x this
  std::vector<double> val_acc;                               // per epoch (val_loss 1 - it); empty: fields absent
  int64_t train_samples = 0;        // steps per epoch ceil(train_samples / global batch); 0: 100 steps per epoch
  double lr = 0.01;                 // lr of epoch k is lr / k, unless lr_by_epoch is set
  std::vector<double> lr_by_epoch;  // the lr of each epoch's record; empty: lr / k
  std::vector<double> train_loss;   // per epoch; empty: 1 / k
};

// Writes <root>/<name>/<run-id>/{spec.json, manifest.json, epochs.jsonl, steps.jsonl (when r.steps
// is not empty)} the way rundir/run_log.h lays them out; returns the run directory.
std::filesystem::path write_run(const std::filesystem::path& root, const FakeRun& r);

// Lines of steps.jsonl every 20 steps of a FakeRun's default epochs (100 steps of batch 64, 12 s
// each: elapsed_s 0.12 s per step), each an evaluation point (log.eval_every_steps) of accuracy
// acc[i] and loss 1 - acc[i]; FakeRun::manifest_patch's "step_eval" says which set they are on.
std::vector<nlohmann::json> eval_points_every_20_steps(const std::vector<double>& acc);

}  // namespace ddplab::testing
