#include "report/fake_run.h"

#include <cmath>

#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::testing {

fs::path write_run(const fs::path& root, const FakeRun& r) {
  std::string id = r.run_id;
  if (id.empty())
    id = "replicas.count=" + std::to_string(r.replicas) + ",schedule.scale_rule=" + r.scale_rule +
         ",seed=" + std::to_string(r.seed);
  const fs::path dir = root / r.name / id;
  fs::create_directories(dir);
  json spec = {{"name", r.name},
               {"seed", r.seed},
               {"output", root.string()},
               {"epochs", 10},
               {"optimizer", {{"name", "sgd"}, {"lr", 0.01}}},
               {"schedule", {{"scale_rule", r.scale_rule}, {"base_batch", 64}}},
               {"batch", {{"per_replica", r.per_replica}}},
               {"replicas", {{"count", r.replicas}, {"device", "cpu"}}}};
  if (r.threads > 0) spec["replicas"]["threads"] = r.threads;
  spec.merge_patch(r.spec_patch);
  write_file(dir / "spec.json", spec.dump(2));
  json manifest = {{"experiment", r.name}, {"run_id", id}, {"status", r.status}, {"start", "2026-01-01T00:00:00Z"}};
  manifest.merge_patch(r.manifest_patch);
  write_file(dir / "manifest.json", manifest.dump(2));
  std::string lines;
  const int64_t global_batch = int64_t{r.per_replica} * r.replicas;
  const int64_t steps_per_epoch = r.train_samples > 0 ? (r.train_samples + global_batch - 1) / global_batch : 100;
  for (size_t i = 0; i < r.test_acc.size(); ++i) {
    const int epoch = static_cast<int>(i) + 1;
    json rec = {{"epoch", epoch},
                {"step", epoch * steps_per_epoch},
                {"lr", r.lr_by_epoch.empty() ? r.lr / epoch : r.lr_by_epoch.at(i)},
                {"train_loss", r.train_loss.empty() ? 1.0 / epoch : r.train_loss.at(i)},
                {"train_acc", r.test_acc[i]},
                {"test_loss", 1.2 / epoch},
                {"test_acc", r.test_acc[i]},
                {"epoch_s", 10.0},
                {"wall_s", r.wall_per_epoch * epoch},
                {"images_per_s", r.images_per_s},
                {"comm_wait_s", 0.1},
                {"grad_norm", 1.0},
                {"replicas", r.replicas},
                {"global_batch", r.per_replica * r.replicas}};
    if (i < r.noise_scale.size())
      rec["grad_noise_scale"] = std::isfinite(r.noise_scale[i]) ? json(r.noise_scale[i]) : json();
    if (i < r.grad_sq.size()) rec["gns_grad_sq_ema"] = r.grad_sq[i];
    if (r.comm_bytes >= 0) rec["comm_bytes"] = static_cast<int64_t>(r.comm_bytes);  // an integer, as ddplab writes it
    if (r.host_cpu_wait_pct >= 0) rec["host_cpu_wait_pct"] = r.host_cpu_wait_pct;
    if (i < r.val_acc.size()) rec["val_acc"] = r.val_acc[i], rec["val_loss"] = 1 - r.val_acc[i];
    lines += rec.dump() + "\n";
  }
  write_file(dir / "epochs.jsonl", lines);
  if (!r.steps.empty()) {
    std::string step_lines;
    for (const auto& s : r.steps) step_lines += s.dump() + "\n";
    write_file(dir / "steps.jsonl", step_lines);
  }
  return dir;
}

std::vector<json> eval_points_every_20_steps(const std::vector<double>& acc) {
  std::vector<json> lines;
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t step = 20 * static_cast<int64_t>(i + 1);
    lines.push_back({{"step", step},
                     {"epoch", static_cast<double>(step) / 100},
                     {"interval_steps", 20},
                     {"lr", 0.01},
                     {"train_loss", 1.0},
                     {"train_acc", 0.5},
                     {"samples", step * 64},
                     {"elapsed_s", 0.12 * static_cast<double>(step)},
                     {"eval_loss", 1.0 - acc[i]},
                     {"eval_acc", acc[i]}});
  }
  return lines;
}

}  // namespace ddplab::testing
