#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/spec.h"
#include "ddplab/report/report.h"
#include "ddplab/rundir/health.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/rundir/run_reader.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t int_field(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

bool array_of_objects(const json& j) {
  return j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_object(); });
}

// Objects become dotted keys, and so do arrays of objects, indexed as a sweep names them
// (model.layers.0.channels); other arrays and scalars are leaves.
void flatten(const json& j, const std::string& prefix, json& out) {
  const auto key = [&](const std::string& k) { return prefix.empty() ? k : fmt::format("{}.{}", prefix, k); };
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), key(it.key()), out);
  } else if (array_of_objects(j)) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], key(fmt::format("{}", i)), out);
  } else if (!prefix.empty()) {
    out[prefix] = j;
  }
}

json group_key(const json& spec) {
  json s = spec.is_object() ? config::upgraded_spec(spec) : json::object();
  for (const char* k : {"seed", "name", "output", "run_id", "report", "slurm"}) s.erase(k);
  json flat = json::object();
  flatten(s, "", flat);
  return flat;
}

MeanStd mean_std(const std::vector<double>& xs) { return {mean(xs), sample_std(xs)}; }

// Settings ddplab derives from another one when left "auto" (the thread budget is split over the
// replicas; the backend follows the device): groups that differ in both differ in one choice.
const std::map<std::string, std::string> kFollows = {{"replicas.threads", "replicas.count"},
                                                     {"replicas.backend", "replicas.device"}};

int64_t seed_of(const RunData& r) { return r.spec.is_object() ? int_field(r.spec, "seed", 0) : 0; }
}  // namespace

std::string value_text(const json& v) {
  if (v.is_null()) return "(unset)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

json setting_value(const GroupStats& g, const Setting& s) {
  if (s.keys.size() == 1) return g.key_spec.value(s.keys.front(), json());
  json out = json::array();
  for (const auto& k : s.keys) out.push_back(g.key_spec.value(k, json()));
  return out;
}

std::string setting_text(const GroupStats& g, const Setting& s) {
  std::vector<std::string> parts;
  for (const auto& k : s.keys) parts.push_back(value_text(g.key_spec.value(k, json())));
  return fmt::format("{}", fmt::join(parts, ", "));
}

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
// Groups the runs by their spec without seed (a run without a spec is alone); returns each
// group's key, by group index.
std::vector<json> group_runs(ReportData& data) {
  std::vector<json> keys;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    RunData& run = data.runs[i];
    json key = run.spec.is_null() ? json{{"run", run.dir.string()}} : group_key(run.spec);
    auto it = std::find(keys.begin(), keys.end(), key);
    run.group = static_cast<size_t>(it - keys.begin());
    if (it == keys.end()) {
      keys.push_back(key);
      data.groups.emplace_back();
      data.groups.back().key_spec = key;
    }
    data.groups[run.group].runs.push_back(i);
  }
  return keys;
}

// The keys whose values differ across groups, sorted.
std::vector<std::string> differing_keys(const std::vector<json>& keys) {
  std::set<std::string> all_keys;
  for (const auto& k : keys)
    for (auto it = k.begin(); it != k.end(); ++it) all_keys.insert(it.key());
  std::vector<std::string> out;
  for (const auto& name : all_keys) {
    for (const auto& k : keys) {
      if (k.value(name, json()) != keys.front().value(name, json())) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

// The experiment names, sorted and joined; "runs" when no run names one.
std::string title_of(const std::vector<RunData>& runs) {
  std::set<std::string> experiments;
  for (const auto& r : runs)
    if (!r.experiment.empty()) experiments.insert(r.experiment);
  return experiments.empty() ? "runs" : fmt::format("{}", fmt::join(experiments, ", "));
}

// report.<name> of the first spec that sets it, else null.
json report_setting(const std::vector<RunData>& runs, const char* name) {
  for (const auto& r : runs) {
    if (!r.spec.is_object() || !r.spec.contains("report") || !r.spec["report"].is_object()) continue;
    const json& rep = r.spec["report"];
    if (rep.contains(name)) return rep[name];
  }
  return json();
}

// --target, else the first spec's report.target_acc.
std::optional<double> target_of(const ReportOptions& options, const std::vector<RunData>& runs) {
  if (options.target_acc) return options.target_acc;
  const json v = report_setting(runs, "target_acc");
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

// --target-loss, else the first spec's report.target_loss.
std::optional<double> target_loss_of(const ReportOptions& options, const std::vector<RunData>& runs) {
  if (options.target_loss) return options.target_loss;
  const json v = report_setting(runs, "target_loss");
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

// equivalence_pts and final_epochs from the options, else the specs; a value resolve() would
// reject (a hand-edited spec.json) is warned about and the default used.
void comparison_settings(const ReportOptions& options, ReportData& data) {
  const json delta = report_setting(data.runs, "equivalence_pts");
  if (options.equivalence_pts) {
    data.equivalence_pts = *options.equivalence_pts;
  } else if (delta.is_number() && delta.get<double>() > 0) {
    data.equivalence_pts = delta.get<double>();
  } else if (!delta.is_null()) {
    data.warnings.push_back(
        fmt::format("report.equivalence_pts: expected a number > 0, got {}; using 0.5", delta.dump()));
  }
  const json k = report_setting(data.runs, "final_epochs");
  if (options.final_epochs) {
    data.final_epochs = *options.final_epochs;
  } else if (k.is_number_integer() && k.get<int64_t>() >= 1 && k.get<int64_t>() <= 1000000) {
    data.final_epochs = k.get<int>();
  } else if (!k.is_null()) {
    data.warnings.push_back(fmt::format("report.final_epochs: expected an integer >= 1, got {}; using 1", k.dump()));
  }
}

// The report.labels map (group label -> display name) of the first spec that has one.
std::map<std::string, std::string> display_names(const std::vector<RunData>& runs) {
  std::map<std::string, std::string> out;
  const json m = report_setting(runs, "labels");
  if (!m.is_object()) return out;
  for (auto it = m.begin(); it != m.end(); ++it)
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  return out;
}

// The differing keys that only follow another differing key (kFollows): across the groups each
// value of the leader comes with one value of the follower, so the leader's value names it.
std::vector<std::string> following_keys(const std::vector<json>& keys, const std::vector<std::string>& differing) {
  std::vector<std::string> out;
  for (const auto& k : differing) {
    const auto f = kFollows.find(k);
    if (f == kFollows.end() || std::count(differing.begin(), differing.end(), f->second) == 0) continue;
    std::map<std::string, json> by_leader;
    bool function = true;
    for (const auto& g : keys) {
      const auto [it, added] = by_leader.emplace(g.value(f->second, json()).dump(), g.value(k, json()));
      if (!added && it->second != g.value(k, json())) function = false;
    }
    if (function) out.push_back(k);
  }
  return out;
}

// The differing keys but `followers` as settings: keys whose values split the groups alike (the
// same groups share a value of each) are one setting.
std::vector<Setting> swept_settings(const std::vector<json>& keys, const std::vector<std::string>& differing,
                                    const std::vector<std::string>& followers) {
  std::vector<Setting> out;
  std::vector<std::vector<size_t>> splits;  // per setting: each group's first group with its value
  for (const auto& k : differing) {
    if (std::count(followers.begin(), followers.end(), k) > 0) continue;
    std::vector<size_t> split;
    for (const auto& g : keys) {
      const auto first = std::find_if(keys.begin(), keys.end(),
                                      [&](const json& h) { return h.value(k, json()) == g.value(k, json()); });
      split.push_back(static_cast<size_t>(first - keys.begin()));
    }
    const auto same = std::find(splits.begin(), splits.end(), split);
    if (same == splits.end()) {
      splits.push_back(split);
      out.push_back({k, {k}});
    } else {
      Setting& s = out[static_cast<size_t>(same - splits.begin())];
      s.name += " + " + k;
      s.keys.push_back(k);
    }
  }
  return out;
}

// The group's values of the differing keys and its label. Keys this group does not set are left
// out of its label ("replicas.sync=allreduce" rather than also
// "replicas.sync.local_sgd.period=(unset)"), unless it sets none of them.
void label_group(const ReportData& data, const std::vector<std::string>& followers, GroupStats& g) {
  g.values = json::object();
  std::vector<std::string> set, unset;
  for (const auto& k : data.differing_keys) {
    const json v = g.key_spec.value(k, json());
    g.values[k] = v;
    if (std::count(followers.begin(), followers.end(), k) > 0) continue;
    (v.is_null() ? unset : set).push_back(fmt::format("{}={}", k, value_text(v)));
  }
  g.label = fmt::format("{}", fmt::join(set.empty() ? unset : set, ", "));
  if (g.label.empty()) g.label = data.title;
  if (g.key_spec.contains("run")) {
    const RunData& run = data.runs[g.runs.front()];
    g.label = fmt::format("{} (no {})", run.run_id, rundir::spec_file(run.dir).filename().string());
  }
}

// The per-run values a group's statistics are taken over (finished runs with records).
struct GroupSamples {
  std::vector<double> best, train_loss, test_loss, thr, t_epochs, t_wall, ns_first, ns_last, comm;
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
  EffectiveSettings e{0, kNaN, kNaN, kNaN};
  if (!run) return e;
  const rundir::EpochRecord &first = run->epochs.front(), &last = run->epochs.back();
  e.global_batch = last.global_batch;
  e.steps_per_epoch = last.epoch > 0 ? static_cast<double>(last.step) / last.epoch : kNaN;
  e.lr_first = first.lr;
  e.lr_peak = first.lr;
  for (const auto& r : run->epochs) e.lr_peak = std::max(e.lr_peak, r.lr);
  return e;
}

// Whether every run with records has a validation accuracy in each of them (and one run has records).
bool every_record_has_validation(const std::vector<RunData>& runs) {
  bool any = false;
  for (const auto& r : runs)
    for (const auto& e : r.epochs) {
      if (!std::isfinite(or_nan(e.val_acc))) return false;
      any = true;
    }
  return any;
}

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

void group_statistics(const ReportData& data, GroupStats& g) {
  GroupSamples s;
  g.target_acc = data.target_acc;
  g.target_loss = data.target_loss;
  for (size_t ri : g.runs) {
    const RunData& r = data.runs[ri];
    if (r.running()) ++g.in_progress;
    const auto health = r.health();
    if (health == RunHealth::kOk) add_run(r, data, g, s);
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

// Sorts the groups by their differing values and renumbers the runs' groups.
void sort_groups(ReportData& data) {
  std::vector<size_t> order(data.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (const auto& k : data.differing_keys) {
      const json va = data.groups[a].values[k], vb = data.groups[b].values[k];
      if (va != vb) return va < vb;
    }
    return false;
  });
  std::vector<GroupStats> sorted;
  std::vector<size_t> new_index(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = i;
    sorted.push_back(std::move(data.groups[order[i]]));
  }
  data.groups = std::move(sorted);
  for (auto& r : data.runs) r.group = new_index[r.group];
}

// The differing keys in which groups a and b differ.
std::vector<std::string> keys_between(const ReportData& data, const GroupStats& a, const GroupStats& b) {
  std::vector<std::string> out;
  for (const auto& k : data.differing_keys)
    if (a.key_spec.value(k, json()) != b.key_spec.value(k, json())) out.push_back(k);
  return out;
}

// The measured counterpart of the noise scale's prediction: the steps to report.target_loss that
// doubling the global batch saved, against a group that differs only in how the batch is made.
void measured_steps_saved(ReportData& data) {
  // replicas.threads too: its default splits the cores over the replicas, so it moves with them.
  const auto makes_the_batch = [](const std::string& k) {
    return k == "replicas.threads" || std::count(kBatchKeys.begin(), kBatchKeys.end(), k) > 0;
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

// Scaling efficiency against the closest 1-replica group with the same per-replica batch.
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

std::string value_in(const GroupStats& g, const std::string& k) { return value_text(g.key_spec.value(k, json())); }

// Fills c.stats: group B's metric against group A's, paired by seed where it can be.
void compare_metric(const ReportData& data, GroupComparison& c) {
  const GroupStats &ga = data.groups[c.a], &gb = data.groups[c.b];
  CompareOptions options;
  options.delta = data.equivalence_pts;
  c.stats = compare_by_seed(ga.metric_by_seed, gb.metric_by_seed, options);
  if (std::isfinite(ga.test_sampling_error_pts) && std::isfinite(gb.test_sampling_error_pts))
    c.stats.resolution_floor = std::max(ga.test_sampling_error_pts, gb.test_sampling_error_pts);
  // The metric is accuracy in points, so B - A lies in [-100, 100]: the t interval of two spread
  // seeds can reach past that, and what lies past it is impossible.
  for (double* end : {&c.stats.ci_low, &c.stats.ci_high, &c.stats.ci90_low, &c.stats.ci90_high})
    if (std::isfinite(*end)) *end = std::clamp(*end, -100.0, 100.0);
  if (ga.collapsed + ga.diverged + gb.collapsed + gb.diverged > 0)
    c.bad_runs_p = fisher_exact_two_sided(ga.collapsed + ga.diverged, ga.n, gb.collapsed + gb.diverged, gb.n);
}

// The index of the setting in data.settings that holds key k; settings.size() for none.
size_t setting_of(const ReportData& data, const std::string& k) {
  const auto s = std::find_if(data.settings.begin(), data.settings.end(),
                              [&](const Setting& s) { return std::count(s.keys.begin(), s.keys.end(), k) > 0; });
  return static_cast<size_t>(s - data.settings.begin());
}

// Groups a and b compared on the metric, when they differ in exactly one setting (derived
// settings that follow it aside) and both have a spec. Holm's correction comes later.
std::optional<GroupComparison> compare(const ReportData& data, size_t a, size_t b) {
  const GroupStats &ga = data.groups[a], &gb = data.groups[b];
  const auto all_ab = keys_between(data, ga, gb);
  std::set<size_t> changed;
  std::vector<std::string> followers;
  for (const auto& k : all_ab) {
    const auto f = kFollows.find(k);
    if (f != kFollows.end() && std::count(all_ab.begin(), all_ab.end(), f->second) > 0)
      followers.push_back(k);
    else
      changed.insert(setting_of(data, k));
  }
  if (changed.size() != 1 || *changed.begin() == data.settings.size() || ga.key_spec.contains("run") ||
      gb.key_spec.contains("run"))
    return std::nullopt;
  const Setting& setting = data.settings[*changed.begin()];
  GroupComparison c;
  c.a = a;
  c.b = b;
  c.key = setting.name;
  c.value_a = setting_text(ga, setting);
  c.value_b = setting_text(gb, setting);
  for (const auto& k : followers)
    c.followers.push_back(fmt::format("{}: {} vs {}", k, value_in(ga, k), value_in(gb, k)));
  compare_metric(data, c);
  return c;
}

// The one group whose settings have every value of `selector` (dotted key -> value); a warning
// naming `where` and nothing when none or several do.
std::optional<size_t> group_selected(ReportData& data, const json& selector, const std::string& where) {
  std::vector<size_t> found;
  for (size_t g = 0; g < data.groups.size(); ++g) {
    const json& spec = data.groups[g].key_spec;
    bool all = selector.is_object() && !selector.empty();
    for (auto it = selector.begin(); all && it != selector.end(); ++it)
      all = spec.contains(it.key()) && spec[it.key()] == it.value();
    if (all) found.push_back(g);
  }
  if (found.size() == 1) return found.front();
  std::string labels;
  for (size_t g : found) labels += fmt::format("{}\"{}\"", labels.empty() ? "" : ", ", data.groups[g].label);
  data.warnings.push_back(found.empty()
                              ? fmt::format("{}: {} selects no group; the contrast is left out", where, selector.dump())
                              : fmt::format("{}: {} selects {} groups ({}); name more settings", where, selector.dump(),
                                            found.size(), labels));
  return std::nullopt;
}

// report.contrasts[i]: groups a and b compared on the metric whatever settings they differ in.
std::optional<GroupComparison> planned_contrast(ReportData& data, const json& contrast, size_t i) {
  const std::string where = fmt::format("report.contrasts[{}]", i);
  const auto a = group_selected(data, contrast.value("a", json()), where + ".a");
  const auto b = group_selected(data, contrast.value("b", json()), where + ".b");
  if (!a || !b || *a == *b) return std::nullopt;
  GroupComparison c;
  c.a = *a;
  c.b = *b;
  c.planned = contrast.value("name", where);
  for (const auto& k : keys_between(data, data.groups[*a], data.groups[*b])) {
    const auto sep = c.key.empty() ? "" : ", ";
    c.key += sep + k;
    c.value_a += sep + value_in(data.groups[*a], k);
    c.value_b += sep + value_in(data.groups[*b], k);
  }
  compare_metric(data, c);
  return c;
}

// Every pair that differs in one setting and every planned contrast of the specs not already
// among them, Holm-corrected over all of them, with its sentence.
// Whether runs a and b trained alike: the same epochs with the same global batch, lr, step,
// losses and accuracies, bit for bit.
bool same_training(const RunData& a, const RunData& b) {
  if (a.epochs.size() != b.epochs.size()) return false;
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    const rundir::EpochRecord &x = a.epochs[i], &y = b.epochs[i];
    if (x.epoch != y.epoch || x.step != y.step || x.global_batch != y.global_batch || !same(x.lr, y.lr) ||
        !same(x.train_loss, y.train_loss) || !same(x.train_acc, y.train_acc) || !same(x.test_loss, y.test_loss) ||
        !same(x.test_acc, y.test_acc))
      return false;
  }
  return true;
}

// The finished runs of `g` with records, by seed (a repeated seed keeps its first run).
std::map<int64_t, const RunData*> finished_by_seed(const ReportData& data, const GroupStats& g) {
  std::map<int64_t, const RunData*> out;
  for (size_t ri : g.runs)
    if (data.runs[ri].finished() && !data.runs[ri].epochs.empty()) out.emplace(seed_of(data.runs[ri]), &data.runs[ri]);
  return out;
}

// Marks c identical when every seed that A and B both finished trained alike in both (and one did).
void mark_identical(const ReportData& data, GroupComparison& c) {
  const auto a = finished_by_seed(data, data.groups[c.a]), b = finished_by_seed(data, data.groups[c.b]);
  size_t shared = 0;
  for (const auto& [seed, run] : a) {
    const auto it = b.find(seed);
    if (it == b.end()) continue;
    if (!same_training(*run, *it->second)) return;
    ++shared;
  }
  c.identical = shared > 0;
  c.identical_seeds = shared;
}

std::string identical_sentence(const GroupComparison& c, const ReportData& data) {
  return fmt::format(
      "identical runs: {} and {} trained alike, every epoch's records equal bit for bit in each of the {} seed{} "
      "they share, so changing {} from {} to {} did nothing here (e.g. an lr scale rule at the base batch, factor "
      "1); no verdict, and not counted in Holm's correction",
      data.groups[c.a].label, data.groups[c.b].label, c.identical_seeds, c.identical_seeds == 1 ? "" : "s", c.key,
      c.value_a, c.value_b);
}

// Identical runs test nothing: no p, no interval, no verdict's inputs, out of Holm's family (m 0).
// The difference (0) and the seeds stay.
void untested(Comparison& s) {
  s.p = s.p_adjusted = kNaN;
  s.ci_low = s.ci_high = s.ci90_low = s.ci90_high = kNaN;
  s.m = 0;
  s.within_delta = s.borderline = false;
  s.verdict = Verdict::cant_tell;
  s.seeds_needed.reset();
  s.equivalence_seeds.reset();
}

// " Compared: ... Fisher's exact test ...": the runs left out of a comparison, when there are some.
std::string bad_runs_sentence(const ReportData& data, const GroupComparison& c) {
  if (!c.bad_runs_p) return "";
  const GroupStats &a = data.groups[c.a], &b = data.groups[c.b];
  return fmt::format(
      ". Compared: {} of {}, {} of {}; the runs that collapsed to chance or diverged are left out, and how often each "
      "group had them is compared by Fisher's exact test: p = {}",
      ok_of_ended(a), a.label, ok_of_ended(b), b.label, fmt::format("{:.2g}", *c.bad_runs_p));
}

void compare_groups(ReportData& data) {
  for (size_t a = 0; a < data.groups.size(); ++a)
    for (size_t b = a + 1; b < data.groups.size(); ++b)
      if (auto c = compare(data, a, b)) data.comparisons.push_back(std::move(*c));
  const json contrasts = report_setting(data.runs, "contrasts");
  for (size_t i = 0; contrasts.is_array() && i < contrasts.size(); ++i) {
    auto c = planned_contrast(data, contrasts[i], i);
    const bool known =
        c && std::any_of(data.comparisons.begin(), data.comparisons.end(), [&](const GroupComparison& o) {
          return (o.a == c->a && o.b == c->b) || (o.a == c->b && o.b == c->a);
        });
    if (c && !known) data.comparisons.push_back(std::move(*c));
  }
  std::vector<Comparison> stats;
  std::vector<GroupComparison*> tested;  // the comparisons in Holm's family
  for (auto& c : data.comparisons) {
    mark_identical(data, c);
    if (c.identical) {
      untested(c.stats);
      c.sentence = identical_sentence(c, data);
      continue;
    }
    stats.push_back(c.stats);
    tested.push_back(&c);
  }
  adjust_for_multiple_comparisons(stats);
  for (size_t i = 0; i < stats.size(); ++i) {
    GroupComparison& c = *tested[i];
    c.stats = stats[i];
    c.sentence = describe(c.stats, data.groups[c.a].label, data.groups[c.b].label) + bad_runs_sentence(data, c);
  }
}

// "replicas.threads follows replicas.count", for the report's opening.
std::vector<std::string> follower_notes(const std::vector<std::string>& followers) {
  std::vector<std::string> out;
  for (const auto& k : followers) out.push_back(fmt::format("{} follows {}", k, kFollows.at(k)));
  return out;
}

// A warning for each finished run whose host load (CPU wait or steal) differs from the median of
// its group's finished runs by more than kHostLoadFlagPts (of two runs, both when they differ by
// twice that: which one is off cannot be told).
void host_load_warnings(ReportData& data) {
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

}  // namespace

namespace {
// The highest point of the group's mean curve (chosen_target), NaN when it has no such runs.
double mean_curve_peak(const ReportData& data, const GroupStats& g) {
  std::map<int, std::vector<double>> by_epoch;
  for (size_t ri : g.runs) {
    const RunData& r = data.runs[ri];
    if (r.health() != RunHealth::kOk) continue;
    for (const auto& e : r.epochs)
      if (std::isfinite(selection_acc(e, data.on_validation)))
        by_epoch[e.epoch].push_back(selection_acc(e, data.on_validation));
  }
  double peak = kNaN;
  for (const auto& [epoch, accs] : by_epoch) peak = std::isfinite(peak) ? std::max(peak, mean(accs)) : mean(accs);
  return peak;
}

// The group whose mean curve peaks lowest: the one that sets the chosen target.
const GroupStats* lowest_peak(const ReportData& data) {
  const GroupStats* lowest = nullptr;
  for (const auto& g : data.groups)
    if (std::isfinite(mean_curve_peak(data, g)) &&
        (!lowest || mean_curve_peak(data, g) < mean_curve_peak(data, *lowest)))
      lowest = &g;
  return lowest;
}
}  // namespace

std::optional<double> chosen_target(const ReportData& data) {
  const GroupStats* lowest = lowest_peak(data);
  if (!lowest) return std::nullopt;
  // Down to 0.1 points: every group's mean curve reaches it.
  return std::floor(mean_curve_peak(data, *lowest) * 1000 + 1e-9) / 1000;
}

ReportData analyze(const ReportOptions& options) {
  ReportData data;
  for (const auto& dir : rundir::find_run_dirs(options.inputs))
    data.runs.push_back(RunData{rundir::read_run(dir, data.warnings)});
  const std::vector<json> keys = group_runs(data);
  data.differing_keys = differing_keys(keys);
  const std::vector<std::string> followers = following_keys(keys, data.differing_keys);
  data.follower_notes = follower_notes(followers);
  data.follower_keys = followers;
  data.settings = swept_settings(keys, data.differing_keys, followers);
  data.title = title_of(data.runs);
  data.target_acc = target_of(options, data.runs);
  data.on_validation = every_record_has_validation(data.runs);
  comparison_settings(options, data);
  data.target_loss = target_loss_of(options, data.runs);
  const auto names = display_names(data.runs);
  for (auto& g : data.groups) {
    std::sort(g.runs.begin(), g.runs.end(),
              [&](size_t a, size_t b) { return seed_of(data.runs[a]) < seed_of(data.runs[b]); });
    label_group(data, followers, g);
    if (const auto it = names.find(g.label); it != names.end()) g.label = it->second;
  }
  if (!data.target_acc) {
    data.target_acc = chosen_target(data);
    data.target_chosen = data.target_acc.has_value();
    if (const GroupStats* lowest = lowest_peak(data)) data.target_set_by = lowest->label;
  }
  for (auto& g : data.groups) group_statistics(data, g);
  sort_groups(data);
  scaling_efficiency(data);
  measured_steps_saved(data);
  host_load_warnings(data);
  compare_groups(data);
  return data;
}

}  // namespace ddplab::report
