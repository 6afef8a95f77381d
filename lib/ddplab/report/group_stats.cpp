#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/config/defaults.h"
#include "ddplab/report/analysis.h"
#include "ddplab/rundir/health.h"

using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

MeanStd mean_std(const std::vector<double>& xs) { return {mean(xs), sample_std(xs)}; }
}  // namespace

std::string ok_of_ended(const GroupStats& g) {
  std::vector<std::string> bad;
  if (g.collapsed > 0) bad.push_back(fmt::format("{} collapsed", g.collapsed));
  if (g.diverged > 0) bad.push_back(fmt::format("{} diverged", g.diverged));
  const int ended = g.n + g.collapsed + g.diverged;
  return fmt::format("{} of {} run{}{}", g.n, ended, ended == 1 ? "" : "s",
                     bad.empty() ? std::string() : fmt::format(" ({})", fmt::join(bad, ", ")));
}

std::string failed_runs(const GroupStats& g) {
  const int failed = g.collapsed + g.diverged, ended = g.n + failed;
  const char* how = g.diverged == 0 ? "collapsed" : g.collapsed == 0 ? "diverged" : "collapsed or diverged";
  return fmt::format("{} of {} run{} {}", failed, ended, ended == 1 ? "" : "s", how);
}

namespace {
// The per-run values a group's statistics are taken over (finished runs with records).
struct GroupSamples {
  std::vector<double> best, train_loss, test_loss, thr, t_epochs, t_wall, ns_first, ns_last, comm;
  std::vector<double> cpu_wait, steal;                 // the host's load while each run trained, where measured
  std::vector<double> t_steps, t_samples, t_device_s;  // to the target accuracy
  std::vector<double> chosen_val, chosen_test;         // on validation: the best epoch's accuracies
  std::vector<double> loss_steps, loss_samples;        // to report.target_loss
  std::map<int64_t, std::vector<double>> metric;       // by seed
  std::string unreliable;                              // why a run's last noise scale was left out
};

std::optional<int64_t> test_samples_of(const json& key_spec) {
  const json limit = key_spec.value("dataset.test_limit", json());
  const auto dataset = config::dataset_of(key_spec.value("dataset.name", json()));
  const std::optional<int64_t> known = dataset ? config::known_test_samples(*dataset) : std::nullopt;
  if (limit.is_number_integer() && limit.get<int64_t>() > 0)
    return known ? std::min(*known, limit.get<int64_t>()) : limit.get<int64_t>();
  return known;
}

// The noise scale of run r at its first and last epoch whose lr is at least 10% of the run's
// peak (a decayed lr makes |G|^2 tiny and B_simple meaningless); the last one only when its
// |G|^2 estimate is clearly positive, else the reason goes to s.unreliable.
void add_noise_scale(const RunData& r, GroupSamples& s) {
  double peak = 0;
  for (const auto& e : r.epochs)
    if (std::isfinite(e.lr)) peak = std::max(peak, e.lr);
  const rundir::EpochRecord* last = nullptr;
  bool first = true;
  for (const auto& e : r.epochs) {
    if (!(e.lr >= 0.1 * peak)) continue;
    if (first && std::isfinite(or_nan(e.grad_noise_scale))) s.ns_first.push_back(*e.grad_noise_scale), first = false;
    last = &e;
  }
  // Only a value from the last epoch describes the end of the run: a local SGD run that
  // stopped all-reducing gradients after epoch 1 would otherwise report epoch 1's estimate.
  if (last == nullptr) return;
  const double grad_sq = or_nan(last->gns_grad_sq_ema), noise_scale = or_nan(last->grad_noise_scale);
  if (grad_sq <= 0)
    s.unreliable = "the |G|\xC2\xB2 estimate is not positive: gradient noise swamps the mean gradient";
  else if (noise_scale > 100.0 * static_cast<double>(last->global_batch))
    s.unreliable = "the |G|\xC2\xB2 estimate is near zero: B_simple is over 100 x the global batch";
  else if (std::isfinite(noise_scale))
    s.ns_last.push_back(noise_scale);
}

bool has_noise_scale(const RunData& r) {
  return std::any_of(r.epochs.begin(), r.epochs.end(), [](const rundir::EpochRecord& e) {
    return std::isfinite(or_nan(e.grad_noise_scale)) || std::isfinite(or_nan(e.gns_grad_sq_ema));
  });
}

// Run r's epoch chosen on validation, and the first epoch at the target.
void add_selection(const RunData& r, const ReportData& data, GroupStats& g, GroupSamples& s) {
  if (data.on_validation)
    if (const rundir::EpochRecord* best = r.best_epoch(true))
      s.chosen_val.push_back(or_nan(best->val_acc)), s.chosen_test.push_back(best->test_acc);
  if (!data.target_acc) return;
  if (const auto p = r.reaching(*data.target_acc, data.on_validation)) {
    ++g.target_reached;
    if (p->point) ++g.target_at_points;
    s.t_epochs.push_back(p->epoch);
    s.t_wall.push_back(p->wall_s);
    s.t_steps.push_back(static_cast<double>(p->step));
    s.t_samples.push_back(p->samples);
    s.t_device_s.push_back(p->wall_s * p->replicas);
  }
}

void add_run(const RunData& r, const ReportData& data, GroupStats& g, GroupSamples& s) {
  const int final_epochs = data.final_epochs;
  ++g.n;
  g.final_accs.push_back(r.final_test_acc());
  s.metric[seed_of(r)].push_back(r.final_test_acc_points(final_epochs));
  s.best.push_back(r.best_test_acc());
  s.train_loss.push_back(r.final_train_loss());
  s.test_loss.push_back(r.final_test_loss());
  s.thr.push_back(r.mean_images_per_s());
  if (std::isfinite(r.mean_host_cpu_wait_pct())) s.cpu_wait.push_back(r.mean_host_cpu_wait_pct());
  if (std::isfinite(r.mean_host_steal_pct())) s.steal.push_back(r.mean_host_steal_pct());
  double bytes = 0;
  bool logged = false;
  for (const auto& e : r.epochs)
    if (e.comm_bytes) bytes += static_cast<double>(*e.comm_bytes), logged = true;
  if (has_noise_scale(r)) add_noise_scale(r, s);
  if (logged) s.comm.push_back(bytes);
  if (g.target_loss) {
    if (const rundir::StepRecord* p = r.steps_to_loss(*g.target_loss)) {
      ++g.target_loss_reached;
      s.loss_steps.push_back(static_cast<double>(p->step));
      s.loss_samples.push_back(static_cast<double>(p->samples));
    }
  }
  add_selection(r, data, g, s);
}

// From the first finished run with records, else the first with records.
EffectiveSettings effective_settings(const ReportData& data, const GroupStats& g) {
  const RunData* run = nullptr;
  for (size_t ri : g.runs)
    if (!data.runs[ri].epochs.empty() && (!run || (!run->finished() && data.runs[ri].finished()))) run = &data.runs[ri];
  EffectiveSettings e{0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN};
  if (!run) return e;
  if (const json lr = run->manifest.value("lr_schedule", json()); lr.is_object()) {
    e.lr_spec = lr.value("spec", kNaN);
    e.lr_scaled = lr.value("scaled", kNaN);
    e.lr_scheduled_peak = lr.value("peak", kNaN);
  }
  const rundir::EpochRecord &first = run->epochs.front(), &last = run->epochs.back();
  e.global_batch = last.global_batch;
  e.steps_per_epoch = last.epoch > 0 ? static_cast<double>(last.step) / last.epoch : kNaN;
  e.lr_first = first.lr;
  e.lr_peak = first.lr;
  for (const auto& r : run->epochs) e.lr_peak = std::max(e.lr_peak, r.lr);
  return e;
}
}  // namespace

bool every_record_has_validation(const std::vector<RunData>& runs) {
  bool any = false;
  for (const auto& r : runs)
    for (const auto& e : r.epochs) {
      if (!std::isfinite(or_nan(e.val_acc))) return false;
      any = true;
    }
  return any;
}

namespace {
void metric_statistics(const GroupSamples& s, GroupStats& g) {
  std::vector<double> values;
  for (const auto& [seed, xs] : s.metric) {
    g.metric_by_seed[seed] = mean(xs);
    values.push_back(g.metric_by_seed[seed]);
  }
  g.metric = mean_std(values);
  g.test_samples = test_samples_of(g.key_spec);
  const double p = g.final_test_acc.mean;
  g.test_sampling_error_pts =
      g.test_samples && p >= 0 && p <= 1 ? test_set_sampling_error_points(p, *g.test_samples) : kNaN;
}
}  // namespace

void group_statistics(const ReportData& data, GroupStats& g) {
  GroupSamples s;
  g.target_acc = data.target_acc;
  g.target_loss = data.target_loss;
  for (size_t ri : g.runs) {
    const RunData& r = data.runs[ri];
    if (r.running()) ++g.in_progress;
    const auto health = r.health();
    if (health == RunHealth::kOk) add_run(r, data, g, s);
    if (r.poor()) ++g.poor;
    if (!health || health == RunHealth::kOk) continue;
    ++(health == RunHealth::kCollapsed ? g.collapsed : g.diverged);
    // A run that diverged or ended near chance says nothing about the noise scale of training.
    if (has_noise_scale(r)) ++g.noise_scale_runs_left_out;
  }
  g.final_test_acc = mean_std(g.final_accs);
  g.best_test_acc = mean_std(s.best);
  g.final_train_loss = mean_std(s.train_loss);
  g.final_test_loss = mean_std(s.test_loss);
  g.images_per_s = mean(s.thr);
  g.host_cpu_wait_pct = mean(s.cpu_wait);
  g.host_steal_pct = mean(s.steal);
  if (!s.thr.empty()) {
    g.images_per_s_min = *std::min_element(s.thr.begin(), s.thr.end());
    g.images_per_s_max = *std::max_element(s.thr.begin(), s.thr.end());
  }
  g.target_epochs = mean(s.t_epochs);
  g.target_wall_s = mean(s.t_wall);
  g.target_steps = mean(s.t_steps);
  g.target_samples = mean(s.t_samples);
  g.target_device_s = mean(s.t_device_s);
  g.chosen_val_acc = mean_std(s.chosen_val);
  g.chosen_test_acc = mean_std(s.chosen_test);
  g.target_wall_s_min = s.t_wall.empty() ? kNaN : *std::min_element(s.t_wall.begin(), s.t_wall.end());
  g.target_wall_s_max = s.t_wall.empty() ? kNaN : *std::max_element(s.t_wall.begin(), s.t_wall.end());
  g.target_loss_steps = mean(s.loss_steps);
  g.target_loss_samples = mean(s.loss_samples);
  g.noise_scale_first = mean(s.ns_first);
  g.noise_scale_last = mean(s.ns_last);
  if (s.ns_last.empty()) g.noise_scale_unreliable = s.unreliable;
  g.comm_bytes = mean(s.comm);
  metric_statistics(s, g);
  // Replica count and per-replica batch from the first run that has records.
  for (size_t ri : g.runs) {
    if (data.runs[ri].epochs.empty()) continue;
    g.replicas = data.runs[ri].replicas();
    g.per_replica_batch = data.runs[ri].per_replica_batch();
    g.global_batch = data.runs[ri].epochs.back().global_batch;
    break;
  }
  g.effective = effective_settings(data, g);
}

void measured_steps_saved(ReportData& data) {
  // A setting that follows one of them too (replicas.threads: its default splits the cores over
  // the replicas, so it moves with them).
  const auto is_batch_key = [](const std::string& k) {
    return std::count(kBatchKeys.begin(), kBatchKeys.end(), k) > 0;
  };
  const auto makes_the_batch = [&](const std::string& k) {
    const auto leader = leaders().find(k);
    return is_batch_key(k) || (leader != leaders().end() && is_batch_key(leader->second));
  };
  for (auto& g : data.groups) {
    if (g.target_loss_reached == 0) continue;
    for (const auto& h : data.groups) {
      if (h.global_batch != 2 * g.global_batch || h.target_loss_reached == 0) continue;
      const auto keys = keys_between(data, g, h);
      if (std::all_of(keys.begin(), keys.end(), makes_the_batch)) {
        g.measured_steps_saved = 1 - h.target_loss_steps / g.target_loss_steps;
        break;
      }
    }
  }
}

void scaling_efficiency(ReportData& data) {
  for (auto& g : data.groups) {
    std::optional<size_t> best_base;
    size_t best_diff = std::numeric_limits<size_t>::max();
    for (size_t j = 0; j < data.groups.size(); ++j) {
      const GroupStats& b = data.groups[j];
      if (b.replicas != 1 || b.per_replica_batch != g.per_replica_batch || b.n == 0 || !(b.images_per_s > 0)) continue;
      const size_t d = keys_between(data, g, b).size();
      if (d < best_diff) {
        best_diff = d;
        best_base = j;
      }
    }
    if (best_base && g.n > 0 && std::isfinite(g.images_per_s)) {
      g.baseline = best_base;
      g.scaling_efficiency = g.images_per_s / (g.replicas * data.groups[*best_base].images_per_s);
    }
  }
}

namespace {
// One warning naming every finished run that trained on a busy host (CPU wait or steal above
// kHostLoadFlagPts), however alike the loads of its group's runs were.
void busy_host_warning(ReportData& data) {
  std::vector<std::string> busy;
  int measured = 0;
  for (const RunData& r : data.runs) {
    if (!r.finished() || r.epochs.empty() || !std::isfinite(r.mean_host_cpu_wait_pct())) continue;
    ++measured;
    const double wait = r.mean_host_cpu_wait_pct(), steal = r.mean_host_steal_pct();
    if (wait > kHostLoadFlagPts || steal > kHostLoadFlagPts)
      busy.push_back(std::isfinite(steal) && steal > kHostLoadFlagPts
                         ? fmt::format("{} (CPU wait {:.0f}%, steal {:.0f}%)", r.run_id, wait, steal)
                         : fmt::format("{} (CPU wait {:.0f}%)", r.run_id, wait));
  }
  if (busy.empty()) return;
  data.warnings.push_back(fmt::format(
      "{} of {} finished runs trained on a busy host (CPU wait or steal above {:g}%: other jobs on its cores, or more "
      "threads than cores): {}; their images/s and times to target include the wait, so speed comparisons with them "
      "are not of the settings alone",
      busy.size(), measured, kHostLoadFlagPts, fmt::join(busy, ", ")));
}
}  // namespace

void host_load_warnings(ReportData& data) {
  busy_host_warning(data);
  const std::pair<const char*, double (RunData::*)() const> measures[] = {
      {"CPU wait", &RunData::mean_host_cpu_wait_pct}, {"CPU steal", &RunData::mean_host_steal_pct}};
  for (const auto& g : data.groups) {
    std::vector<size_t> runs;
    for (size_t ri : g.runs)
      if (data.runs[ri].finished() && !data.runs[ri].epochs.empty()) runs.push_back(ri);
    for (const auto& [what, measure] : measures) {
      std::vector<double> values;
      for (size_t ri : runs) values.push_back((data.runs[ri].*measure)());
      const double median = percentile(values, 0.5);
      for (size_t i = 0; i < runs.size(); ++i) {
        if (!(std::abs(values[i] - median) > kHostLoadFlagPts)) continue;
        const RunData& r = data.runs[runs[i]];
        data.warnings.push_back(fmt::format(
            "{} ({}): the host's {} was {:.0f}% while it trained, {:.0f}% over its group's {} runs (median); its "
            "images/s and time to target measure the machine's load, not its setting ({:.0f} images/s)",
            r.run_id, g.label, what, values[i], median, runs.size(), r.mean_images_per_s()));
      }
    }
  }
}

}  // namespace ddplab::report
