#include "ddplab/tensorboard/run_events.h"

#include <algorithm>
#include <cmath>

namespace ddplab::tensorboard {
using nlohmann::json;

std::vector<Scalar> run_scalars(const rundir::RunData& run, double start) {
  std::vector<Scalar> out;
  const auto add = [&](int64_t step, double wall_s, const char* tag, double value) {
    if (std::isfinite(value)) out.push_back({step, start + wall_s, tag, value});
  };
  for (const auto& p : run.epochs) {
    const int64_t samples = p.step * p.global_batch;
    add(samples, p.wall_s, "train/loss", p.train_loss);
    add(samples, p.wall_s, "train/acc", p.train_acc);
    add(samples, p.wall_s, "test/loss", p.test_loss);
    add(samples, p.wall_s, "test/acc", p.test_acc);
    add(samples, p.wall_s, "val/loss", rundir::or_nan(p.val_loss));  // none without a validation split
    add(samples, p.wall_s, "val/acc", rundir::or_nan(p.val_acc));
    add(samples, p.wall_s, "lr", p.lr);
    add(samples, p.wall_s, "images_per_s", p.images_per_s);
    add(samples, p.wall_s, "comm_wait_s", p.comm_wait_s);
    if (p.comm_bytes) add(samples, p.wall_s, "comm_bytes", static_cast<double>(*p.comm_bytes));
    add(samples, p.wall_s, "grad_noise_scale", rundir::or_nan(p.grad_noise_scale));
    add(samples, p.wall_s, "epoch", p.epoch);
  }
  for (const auto& s : run.steps) {
    add(s.samples, s.elapsed_s, "steps/train_loss", s.train_loss);
    add(s.samples, s.elapsed_s, "steps/train_acc", s.train_acc);
    add(s.samples, s.elapsed_s, "steps/lr", s.lr);
    add(s.samples, s.elapsed_s, "steps/eval_loss", rundir::or_nan(s.eval_loss));  // log.eval_every_steps
    add(s.samples, s.elapsed_s, "steps/eval_acc", rundir::or_nan(s.eval_acc));
  }
  std::stable_sort(out.begin(), out.end(), [](const Scalar& a, const Scalar& b) { return a.step < b.step; });
  return out;
}

std::string manifest_host(const json& manifest) {
  const json host = manifest.value("host", json("ddplab"));
  return host.is_string() && !host.get<std::string>().empty() ? host.get<std::string>() : "ddplab";
}

std::optional<HParamValue> hparam_value(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::nullopt;
  return v.dump();
}

}  // namespace ddplab::tensorboard
