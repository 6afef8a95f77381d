#include "integration/integration_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/models/models.h"
#include "ddplab/runner/sweep.h"
#include "ddplab/train/options.h"

namespace ddplab::testing {

Workspace::Workspace(int train, int test) {
  write_tiny_mnist(data(), train, test, /*gzip=*/true);
  std::filesystem::create_directories(out());
}

nlohmann::json Workspace::base_spec(const std::string& name) const {
  return {{"name", name},
          {"dataset", {{"name", "idx"}, {"root", data().string()}}},
          {"model", {{"name", "mlp"}, {"hidden", 32}, {"dropout", 0.0}}},
          {"optimizer", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}}},
          {"batch", {{"global", 64}}},
          {"replicas", {{"count", 1}, {"threads", 1}, {"timeout_s", 30}}},
          {"epochs", 2},
          {"seed", 3},
          {"output", out().string()}};
}

std::string Workspace::write_spec(const nlohmann::json& spec, const std::string& file) const {
  auto path = dir_.path() / file;
  write_file(path, spec.dump(2));
  return path.string();
}

nlohmann::json batch_norm_dropout_model(double dropout) {
  return {{"layers",
           {{{"type", "conv"}, {"channels", 4}, {"kernel", 3}},
            {{"type", "batch_norm"}},
            {{"type", "relu"}},
            {{"type", "max_pool"}, {"kernel", 2}},
            {{"type", "flatten"}},
            {{"type", "dropout"}, {"p", dropout}},
            {{"type", "linear"}, {"features", 10}}}}};
}

std::vector<nlohmann::json> read_records(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir / "epochs.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

RunOutput run_spec(const Workspace& ws, nlohmann::json spec, const std::string& name) {
  spec["name"] = name;
  RunOutput out;
  out.command = run_ddplab("run " + ws.write_spec(spec, name + ".json"));
  std::filesystem::path dir = ws.out() / name / fmt::format("seed={}", spec["seed"].get<int>());
  out.records = read_records(dir);
  if (std::filesystem::exists(dir / "model.pt")) out.params = read_final_params(dir, spec["model"]);
  return out;
}

std::vector<float> read_final_params(const std::filesystem::path& run_dir, const nlohmann::json& model_spec,
                                     const models::InputShape& shape) {
  nlohmann::json doc = {{"name", "x"}, {"model", model_spec}};
  auto spec = config::resolve(doc);
  auto model = models::make_model(train::model_options(spec.model), shape);
  torch::load(model, (run_dir / "model.pt").string());
  std::vector<float> flat;
  for (const auto& p : model->parameters()) {
    auto c = p.detach().contiguous().reshape({-1});
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return flat;
}

bool process_with_argument_exists(const std::string& needle) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) return true;
  }
  return false;
}

double relative_difference(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(a), 1e-12); }

void expect_close_metrics(const nlohmann::json& a, const nlohmann::json& b, double tol, const std::string& where) {
  for (const char* k : {"train_loss", "test_loss", "test_acc"})
    EXPECT_LE(relative_difference(a.at(k), b.at(k)), tol)
        << k << " in " << where << ": " << a.at(k) << " vs " << b.at(k);
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return diff / std::max(scale, 1e-12);
}

}  // namespace ddplab::testing

namespace ddplab::testing {

std::vector<std::string> run_ids_in_run_order(const nlohmann::json& spec) {
  const auto runs = config::expand_sweep(spec, "spec.json");
  std::vector<std::string> ids;
  for (size_t i : runner::run_order(runs)) ids.push_back(runs[i].run_id);
  return ids;
}

nlohmann::json sweep_running_in_order(nlohmann::json spec, const std::string& key,
                                      const std::vector<nlohmann::json>& values) {
  spec["sweep"] = {{key, values}};
  const auto order = runner::run_order(config::expand_sweep(spec, "spec.json"));
  nlohmann::json placed = nlohmann::json::array();
  for (size_t i = 0; i < values.size(); ++i) placed.push_back(nullptr);
  for (size_t k = 0; k < order.size(); ++k) placed[order[k]] = values[k];
  spec["sweep"][key] = placed;
  return spec;
}

}  // namespace ddplab::testing
