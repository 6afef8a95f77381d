#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/report/report.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t int_field(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}
std::string str_field(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

void find_below(const fs::path& dir, std::vector<fs::path>& out) {
  if (fs::exists(rundir::manifest_file(dir))) {
    out.push_back(dir);
    return;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) find_below(entry.path(), out);
}

// Objects become dotted keys; arrays and scalars are leaves.
void flatten(const json& j, const std::string& prefix, json& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : fmt::format("{}.{}", prefix, it.key()), out);
  } else if (!prefix.empty()) {
    out[prefix] = j;
  }
}

json group_key(const json& spec) {
  json s = spec.is_object() ? spec : json::object();
  for (const char* k : {"seed", "name", "output", "run_id", "report"}) s.erase(k);
  json flat = json::object();
  flatten(s, "", flat);
  return flat;
}

MeanStd mean_std(const std::vector<double>& xs) { return {mean(xs), sample_std(xs)}; }

std::string value_text(const json& v) {
  if (v.is_null()) return "(unset)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Settings ddplab derives from another one when left "auto" (the thread budget is split over the
// replicas; the backend follows the device): groups that differ in both differ in one choice.
const std::map<std::string, std::string> kFollows = {{"replicas.threads", "replicas.count"},
                                                     {"replicas.backend", "replicas.device"}};

int64_t seed_of(const RunData& r) {
  return r.spec.is_object() ? int_field(r.spec, "seed", 0) : 0;
}
}  // namespace

std::string RunData::status_text() const { return running() ? "in progress" : status_name; }

int RunData::replicas() const {
  if (!epochs.empty()) return epochs.back().replicas;
  if (spec.is_object() && spec.contains("replicas") && spec["replicas"].is_object())
    return spec["replicas"].value("count", 1);
  return 1;
}

int64_t RunData::per_replica_batch() const {
  if (epochs.empty() || epochs.back().replicas <= 0) return 0;
  return epochs.back().global_batch / epochs.back().replicas;
}

double RunData::final_test_acc() const { return epochs.empty() ? kNaN : epochs.back().test_acc; }
double RunData::final_train_loss() const { return epochs.empty() ? kNaN : epochs.back().train_loss; }
double RunData::final_test_loss() const { return epochs.empty() ? kNaN : epochs.back().test_loss; }

double RunData::best_test_acc() const {
  double best = kNaN;
  for (const auto& e : epochs)
    if (std::isfinite(e.test_acc) && !(best >= e.test_acc)) best = e.test_acc;
  return best;
}

double RunData::mean_images_per_s() const {
  std::vector<double> xs;
  for (const auto& e : epochs)
    if (std::isfinite(e.images_per_s)) xs.push_back(e.images_per_s);
  return mean(xs);
}

const EpochPoint* RunData::first_reaching(double target) const {
  for (const auto& e : epochs)
    if (e.test_acc >= target) return &e;
  return nullptr;
}

std::vector<fs::path> find_run_dirs(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> dirs;
  for (const auto& input : inputs) {
    if (!fs::is_directory(input)) throw Error(fmt::format("{}: not a directory", input.string()));
    const size_t before = dirs.size();
    find_below(input, dirs);
    if (dirs.size() == before)
      throw Error(fmt::format("{}: no runs found (no {} below it)", input.string(),
                              rundir::manifest_file(input).filename().string()));
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

namespace {
// run_id, status, message and experiment from manifest.json. Any status is kept (and shown): a
// report reads run directories that ddplab did not necessarily write.
void read_manifest_fields(const fs::path& dir, RunData& run) {
  const fs::path file = rundir::manifest_file(dir);
  const json manifest = rundir::read_json(file);  // an Error naming the file
  if (!manifest.is_object()) throw Error(fmt::format("{}: expected a JSON object", file.string()));
  run.run_id = str_field(manifest, "run_id", run.run_id);
  run.status_name = str_field(manifest, "status", "unknown");
  run.status = rundir::parse_status(run.status_name);
  run.message = str_field(manifest, "message", "");
  run.experiment = str_field(manifest, "experiment", "");
}

// spec.json; a run without a readable one is grouped alone (with a warning).
void read_spec(const fs::path& dir, RunData& run, std::vector<std::string>& warnings) {
  const fs::path file = rundir::spec_file(dir);
  if (fs::exists(file)) {
    try {
      run.spec = rundir::read_json(file);
    } catch (const std::exception& e) {
      warnings.push_back(fmt::format("{}; grouped alone", e.what()));
    }
  } else {
    warnings.push_back(fmt::format("{}: missing; grouped alone", file.string()));
  }
  if (run.spec.is_object()) run.experiment = str_field(run.spec, "name", run.experiment);
}

EpochPoint point_of(const rundir::EpochRecord& r, bool has_comm_bytes) {
  EpochPoint p;
  p.epoch = r.epoch;
  p.lr = r.lr;
  p.train_loss = r.train_loss;
  p.train_acc = r.train_acc;
  p.test_loss = r.test_loss;
  p.test_acc = r.test_acc;
  p.wall_s = r.wall_s;
  p.images_per_s = r.images_per_s;
  p.grad_noise_scale = r.grad_noise_scale.value_or(kNaN);
  // A record older than the field has no byte count: unknown, not 0.
  p.comm_bytes = has_comm_bytes ? static_cast<double>(r.comm_bytes) : kNaN;
  p.replicas = r.replicas;
  p.global_batch = r.global_batch;
  return p;
}

// epochs.jsonl through rundir::EpochRecord::from_json; a line that is not a record is skipped
// with a warning "<file>:<line>: skipped corrupt record (<why>)". A repeated epoch keeps its last.
void read_records(const fs::path& dir, RunData& run, std::vector<std::string>& warnings) {
  const fs::path file = rundir::epochs_file(dir);
  std::ifstream in(file);
  std::map<int, EpochPoint> by_epoch;
  std::string line;
  for (int line_no = 1; in && std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string why;
    try {
      const json j = json::parse(line);
      const EpochPoint p = point_of(rundir::EpochRecord::from_json(j), j.contains("comm_bytes"));
      by_epoch[p.epoch] = p;
      continue;
    } catch (const json::exception&) {
      why = "not valid JSON";
    } catch (const Error& e) {
      why = e.what();
    }
    warnings.push_back(fmt::format("{}:{}: skipped corrupt record ({})", file.string(), line_no, why));
  }
  for (auto& [epoch, p] : by_epoch) run.epochs.push_back(p);
}
}  // namespace

RunData load_run(const fs::path& dir, std::vector<std::string>& warnings) {
  RunData run;
  run.dir = dir;
  run.run_id = dir.filename().string();
  read_manifest_fields(dir, run);
  read_spec(dir, run, warnings);
  read_records(dir, run, warnings);
  return run;
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

// --target, else the first spec's report.target_acc.
std::optional<double> target_of(const ReportOptions& options, const std::vector<RunData>& runs) {
  if (options.target_acc) return options.target_acc;
  for (const auto& r : runs) {
    if (!r.spec.is_object() || !r.spec.contains("report") || !r.spec["report"].is_object()) continue;
    const json& rep = r.spec["report"];
    if (rep.contains("target_acc") && rep["target_acc"].is_number()) return rep["target_acc"].get<double>();
  }
  return std::nullopt;
}

// The group's values of the differing keys and its label. Keys this group does not set are left
// out of its label ("replicas.sync=allreduce" rather than also
// "replicas.sync.local_sgd.period=(unset)"), unless it sets none of them.
void label_group(const ReportData& data, GroupStats& g) {
  g.values = json::object();
  std::vector<std::string> set, unset;
  for (const auto& k : data.differing_keys) {
    const json v = g.key_spec.value(k, json());
    g.values[k] = v;
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
};

void add_run(const RunData& r, const std::optional<double>& target, GroupStats& g, GroupSamples& s) {
  ++g.n;
  g.final_accs.push_back(r.final_test_acc());
  s.best.push_back(r.best_test_acc());
  s.train_loss.push_back(r.final_train_loss());
  s.test_loss.push_back(r.final_test_loss());
  s.thr.push_back(r.mean_images_per_s());
  std::vector<double> ns;
  double bytes = 0;
  bool logged = false;
  for (const auto& e : r.epochs) {
    if (std::isfinite(e.grad_noise_scale)) ns.push_back(e.grad_noise_scale);
    if (std::isfinite(e.comm_bytes)) bytes += e.comm_bytes, logged = true;
  }
  if (!ns.empty()) s.ns_first.push_back(ns.front());
  // Only a value from the final epoch describes the end of the run: a local SGD run that
  // stopped all-reducing gradients after epoch 1 would otherwise report epoch 1's estimate.
  if (std::isfinite(r.epochs.back().grad_noise_scale)) s.ns_last.push_back(r.epochs.back().grad_noise_scale);
  if (logged) s.comm.push_back(bytes);
  if (!target) return;
  if (const EpochPoint* p = r.first_reaching(*target)) {
    ++g.target_reached;
    s.t_epochs.push_back(p->epoch);
    s.t_wall.push_back(p->wall_s);
  }
}

void group_statistics(const ReportData& data, const std::optional<double>& target, GroupStats& g) {
  GroupSamples s;
  g.target_acc = target;
  for (size_t ri : g.runs) {
    const RunData& r = data.runs[ri];
    if (r.running()) ++g.in_progress;
    if (r.finished() && !r.epochs.empty()) add_run(r, target, g, s);
  }
  g.final_test_acc = mean_std(g.final_accs);
  g.best_test_acc = mean_std(s.best);
  g.final_train_loss = mean_std(s.train_loss);
  g.final_test_loss = mean_std(s.test_loss);
  g.images_per_s = mean(s.thr);
  g.target_epochs = mean(s.t_epochs);
  g.target_wall_s = mean(s.t_wall);
  g.noise_scale_first = mean(s.ns_first);
  g.noise_scale_last = mean(s.ns_last);
  g.comm_bytes = mean(s.comm);
  // Replica count and per-replica batch from the first run that has records.
  for (size_t ri : g.runs) {
    if (data.runs[ri].epochs.empty()) continue;
    g.replicas = data.runs[ri].replicas();
    g.per_replica_batch = data.runs[ri].per_replica_batch();
    g.global_batch = data.runs[ri].epochs.back().global_batch;
    break;
  }
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

// Groups a and b compared on final test accuracy, when they differ in exactly one setting
// (derived settings that follow it aside) and both have a spec.
std::optional<Comparison> compare(const ReportData& data, size_t a, size_t b) {
  const GroupStats &ga = data.groups[a], &gb = data.groups[b];
  const auto all_ab = keys_between(data, ga, gb);
  std::vector<std::string> keys_ab, followers;
  for (const auto& k : all_ab) {
    const auto f = kFollows.find(k);
    const bool follows = f != kFollows.end() && std::count(all_ab.begin(), all_ab.end(), f->second) > 0;
    (follows ? followers : keys_ab).push_back(k);
  }
  if (keys_ab.size() != 1 || ga.key_spec.contains("run") || gb.key_spec.contains("run")) return std::nullopt;
  const auto value_in = [](const GroupStats& g, const std::string& k) { return value_text(g.key_spec.value(k, json())); };
  Comparison c;
  c.a = a;
  c.b = b;
  c.key = keys_ab.front();
  c.value_a = value_in(ga, c.key);
  c.value_b = value_in(gb, c.key);
  for (const auto& k : followers) c.followers.push_back(fmt::format("{}: {} vs {}", k, value_in(ga, k), value_in(gb, k)));
  c.welch = welch_t_test(ga.final_accs, gb.final_accs);
  if (!c.welch.valid) {
    c.verdict = fmt::format("cannot tell (n={})", std::min(ga.n, gb.n));
  } else {
    c.significant = c.welch.p < 0.05;
    c.verdict = c.significant ? "significant (p < 0.05)" : "not significant";
  }
  return c;
}
}  // namespace

ReportData analyze(const ReportOptions& options) {
  ReportData data;
  for (const auto& dir : find_run_dirs(options.inputs)) data.runs.push_back(load_run(dir, data.warnings));
  data.differing_keys = differing_keys(group_runs(data));
  data.title = title_of(data.runs);
  const std::optional<double> target = target_of(options, data.runs);
  for (auto& g : data.groups) {
    std::sort(g.runs.begin(), g.runs.end(),
              [&](size_t a, size_t b) { return seed_of(data.runs[a]) < seed_of(data.runs[b]); });
    label_group(data, g);
    group_statistics(data, target, g);
  }
  sort_groups(data);
  scaling_efficiency(data);
  for (size_t a = 0; a < data.groups.size(); ++a)
    for (size_t b = a + 1; b < data.groups.size(); ++b)
      if (auto c = compare(data, a, b)) data.comparisons.push_back(std::move(*c));
  return data;
}

}  // namespace ddplab::report
