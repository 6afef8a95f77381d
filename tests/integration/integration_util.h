// Shared by the integration tests: a tiny MNIST-format dataset and spec files in a temp dir,
// and readers for what a run leaves behind.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/models/models.h"
#include "test_util.h"

namespace ddplab::testing {

// A temp dir holding data/ (tiny MNIST, 512 train / 200 test) and an `out` directory for runs.
class Workspace {
 public:
  explicit Workspace(int train = 512, int test = 200);
  // A spec for the tiny data: mlp, dropout 0, sgd, 2 epochs, 1 thread per replica.
  nlohmann::json base_spec(const std::string& name) const;
  // Writes `spec` to <dir>/<file> and returns the path.
  std::string write_spec(const nlohmann::json& spec, const std::string& file = "spec.json") const;
  std::filesystem::path out() const { return dir_.path() / "out"; }
  std::filesystem::path data() const { return dir_.path() / "data"; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

// A `model` of layers for the tiny data with each thing a training forward changes or draws: a
// convolution, BatchNorm (running statistics, a batch count), dropout of rate `dropout`.
nlohmann::json batch_norm_dropout_model(double dropout);

std::vector<nlohmann::json> read_records(const std::filesystem::path& run_dir);

// The run ids of the sweep `spec` in the order a sweep runs them (runner::run_order).
std::vector<std::string> run_ids_in_run_order(const nlohmann::json& spec);
// `spec` with the values of its one swept key `key` placed so that the sweep runs them in the
// order `values` lists them: run_order shuffles the arms by the experiment's name and their
// count alone, so a test that needs "this run second" places the value there.
nlohmann::json sweep_running_in_order(nlohmann::json spec, const std::string& key,
                                      const std::vector<nlohmann::json>& values);

// What `ddplab run` of one spec left: its output, records and final parameters (if model.pt).
struct RunOutput {
  CommandResult command;
  std::vector<nlohmann::json> records;
  std::vector<float> params;
};
// Runs `spec` named `name` (written to <name>.json in the workspace).
RunOutput run_spec(const Workspace& ws, nlohmann::json spec, const std::string& name);

// Final parameters from <run_dir>/model.pt, flattened in registration order; `shape` is the
// model's input shape (the default: 28x28 MNIST).
std::vector<float> read_final_params(const std::filesystem::path& run_dir, const nlohmann::json& model_spec,
                                     const models::InputShape& shape = {});

// Whether any live process has `needle` in its command line (scans /proc).
bool process_with_argument_exists(const std::string& needle);

// |a - b| / |a| (a = 0: / 1e-12).
double relative_difference(double a, double b);

// Expects train_loss, test_loss and test_acc of two epoch records within `tol` (relative).
void expect_close_metrics(const nlohmann::json& a, const nlohmann::json& b, double tol, const std::string& where);

// max_i |a_i - b_i| / max_i |a_i|: the largest difference relative to the parameters' scale.
double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ddplab::testing
