#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/report/report.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::report {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double num_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}
int64_t int_field(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}
std::string str_field(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

void find_below(const fs::path& dir, std::vector<fs::path>& out) {
  if (fs::exists(dir / "manifest.json")) {
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
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
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

std::string RunData::status_text() const { return status == "running" ? "in progress" : status; }

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
    if (!fs::is_directory(input)) throw Error(input.string() + ": not a directory");
    const size_t before = dirs.size();
    find_below(input, dirs);
    if (dirs.size() == before) throw Error(input.string() + ": no runs found (no manifest.json below it)");
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

RunData load_run(const fs::path& dir, std::vector<std::string>& warnings) {
  RunData run;
  run.dir = dir;
  run.run_id = dir.filename().string();
  json manifest = rundir::read_json(dir / "manifest.json");  // an Error naming the file
  if (!manifest.is_object()) throw Error((dir / "manifest.json").string() + ": expected a JSON object");
  run.run_id = str_field(manifest, "run_id", run.run_id);
  run.status = str_field(manifest, "status", "unknown");
  run.message = str_field(manifest, "message", "");
  run.experiment = str_field(manifest, "experiment", "");

  const fs::path spec_file = dir / "spec.json";
  if (fs::exists(spec_file)) {
    try {
      run.spec = rundir::read_json(spec_file);
    } catch (const std::exception& e) {
      warnings.push_back(std::string(e.what()) + "; grouped alone");
    }
  } else {
    warnings.push_back(spec_file.string() + ": missing; grouped alone");
  }
  if (run.spec.is_object()) run.experiment = str_field(run.spec, "name", run.experiment);

  const fs::path records = dir / "epochs.jsonl";
  std::ifstream in(records);
  std::map<int, EpochPoint> by_epoch;
  std::string line;
  for (int line_no = 1; in && std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception&) {
      warnings.push_back(records.string() + ":" + std::to_string(line_no) +
                         ": skipped corrupt record (not valid JSON)");
      continue;
    }
    if (!j.is_object() || !j.contains("epoch") || !j["epoch"].is_number_integer() || !j.contains("test_acc") ||
        !j["test_acc"].is_number()) {
      warnings.push_back(records.string() + ":" + std::to_string(line_no) +
                         ": skipped corrupt record (needs integer epoch and numeric test_acc)");
      continue;
    }
    EpochPoint p;
    p.epoch = j["epoch"].get<int>();
    p.lr = num_field(j, "lr");
    p.train_loss = num_field(j, "train_loss");
    p.train_acc = num_field(j, "train_acc");
    p.test_loss = num_field(j, "test_loss");
    p.test_acc = num_field(j, "test_acc");
    p.wall_s = num_field(j, "wall_s");
    p.images_per_s = num_field(j, "images_per_s");
    p.grad_noise_scale = num_field(j, "grad_noise_scale");
    p.comm_bytes = num_field(j, "comm_bytes");
    p.replicas = static_cast<int>(int_field(j, "replicas", 1));
    p.global_batch = int_field(j, "global_batch", 0);
    by_epoch[p.epoch] = p;
  }
  for (auto& [epoch, p] : by_epoch) run.epochs.push_back(p);
  return run;
}

ReportData analyze(const ReportOptions& options) {
  ReportData data;
  for (const auto& dir : find_run_dirs(options.inputs)) data.runs.push_back(load_run(dir, data.warnings));

  // Group by the spec without seed (a run without a spec is alone).
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

  // Keys whose values differ across groups.
  std::set<std::string> all_keys;
  for (const auto& k : keys)
    for (auto it = k.begin(); it != k.end(); ++it) all_keys.insert(it.key());
  for (const auto& name : all_keys) {
    for (const auto& k : keys) {
      if (k.value(name, json()) != keys.front().value(name, json())) {
        data.differing_keys.push_back(name);
        break;
      }
    }
  }

  std::set<std::string> experiments;
  for (const auto& r : data.runs)
    if (!r.experiment.empty()) experiments.insert(r.experiment);
  for (const auto& e : experiments) data.title += (data.title.empty() ? "" : ", ") + e;
  if (data.title.empty()) data.title = "runs";

  std::optional<double> spec_target;
  for (const auto& r : data.runs) {
    if (spec_target || !r.spec.is_object() || !r.spec.contains("report") || !r.spec["report"].is_object()) continue;
    const json& rep = r.spec["report"];
    if (rep.contains("target_acc") && rep["target_acc"].is_number()) spec_target = rep["target_acc"].get<double>();
  }
  const std::optional<double> target = options.target_acc ? options.target_acc : spec_target;

  for (size_t gi = 0; gi < data.groups.size(); ++gi) {
    GroupStats& g = data.groups[gi];
    std::sort(g.runs.begin(), g.runs.end(),
              [&](size_t a, size_t b) { return seed_of(data.runs[a]) < seed_of(data.runs[b]); });
    g.values = json::object();
    std::string label;
    // Keys this group does not set are left out of its label ("replicas.sync=allreduce" rather than
    // also "replicas.sync.local_sgd.period=(unset)"), unless it sets none of them.
    std::string unset_label;
    for (const auto& k : data.differing_keys) {
      const json v = g.key_spec.value(k, json());
      g.values[k] = v;
      std::string& into = v.is_null() ? unset_label : label;
      into += (into.empty() ? "" : ", ") + k + "=" + value_text(v);
    }
    if (label.empty()) label = unset_label;
    if (label.empty()) label = data.title;
    if (g.key_spec.contains("run")) label = data.runs[g.runs.front()].run_id + " (no spec.json)";
    g.label = label;

    std::vector<double> best, train_loss, test_loss, thr, t_epochs, t_wall, ns_first, ns_last, comm;
    g.target_acc = target;
    for (size_t ri : g.runs) {
      const RunData& r = data.runs[ri];
      if (r.status == "running") ++g.in_progress;
      if (!r.finished() || r.epochs.empty()) continue;
      ++g.n;
      g.final_accs.push_back(r.final_test_acc());
      best.push_back(r.best_test_acc());
      train_loss.push_back(r.final_train_loss());
      test_loss.push_back(r.final_test_loss());
      thr.push_back(r.mean_images_per_s());
      std::vector<double> ns;
      double bytes = 0;
      bool logged = false;
      for (const auto& e : r.epochs) {
        if (std::isfinite(e.grad_noise_scale)) ns.push_back(e.grad_noise_scale);
        if (std::isfinite(e.comm_bytes)) bytes += e.comm_bytes, logged = true;
      }
      if (!ns.empty()) ns_first.push_back(ns.front());
      // Only a value from the final epoch describes the end of the run: a local SGD run that
      // stopped all-reducing gradients after epoch 1 would otherwise report epoch 1's estimate.
      if (std::isfinite(r.epochs.back().grad_noise_scale)) ns_last.push_back(r.epochs.back().grad_noise_scale);
      if (logged) comm.push_back(bytes);
      if (target) {
        if (const EpochPoint* p = r.first_reaching(*target)) {
          ++g.target_reached;
          t_epochs.push_back(p->epoch);
          t_wall.push_back(p->wall_s);
        }
      }
    }
    g.final_test_acc = mean_std(g.final_accs);
    g.best_test_acc = mean_std(best);
    g.final_train_loss = mean_std(train_loss);
    g.final_test_loss = mean_std(test_loss);
    g.images_per_s = mean(thr);
    g.target_epochs = mean(t_epochs);
    g.target_wall_s = mean(t_wall);
    g.noise_scale_first = mean(ns_first);
    g.noise_scale_last = mean(ns_last);
    g.comm_bytes = mean(comm);
    // Replica count and per-replica batch from the first run that has records.
    for (size_t ri : g.runs) {
      if (data.runs[ri].epochs.empty()) continue;
      g.replicas = data.runs[ri].replicas();
      g.per_replica_batch = data.runs[ri].per_replica_batch();
      g.global_batch = data.runs[ri].epochs.back().global_batch;
      break;
    }
  }

  // Sort groups by their differing values, then renumber.
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

  auto differing = [&](const GroupStats& a, const GroupStats& b) {
    std::vector<std::string> out;
    for (const auto& k : data.differing_keys)
      if (a.key_spec.value(k, json()) != b.key_spec.value(k, json())) out.push_back(k);
    return out;
  };

  // Scaling efficiency against the closest 1-replica group with the same per-replica batch.
  for (auto& g : data.groups) {
    std::optional<size_t> best_base;
    size_t best_diff = std::numeric_limits<size_t>::max();
    for (size_t j = 0; j < data.groups.size(); ++j) {
      const GroupStats& b = data.groups[j];
      if (b.replicas != 1 || b.per_replica_batch != g.per_replica_batch || b.n == 0 || !(b.images_per_s > 0)) continue;
      const size_t d = differing(g, b).size();
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

  for (size_t a = 0; a < data.groups.size(); ++a) {
    for (size_t b = a + 1; b < data.groups.size(); ++b) {
      const auto all_ab = differing(data.groups[a], data.groups[b]);
      std::vector<std::string> keys_ab, followers;
      for (const auto& k : all_ab) {
        const auto f = kFollows.find(k);
        const bool follows = f != kFollows.end() && std::count(all_ab.begin(), all_ab.end(), f->second) > 0;
        (follows ? followers : keys_ab).push_back(k);
      }
      if (keys_ab.size() != 1 || data.groups[a].key_spec.contains("run") || data.groups[b].key_spec.contains("run"))
        continue;
      const json &spec_a = data.groups[a].key_spec, &spec_b = data.groups[b].key_spec;
      Comparison c;
      c.a = a;
      c.b = b;
      c.key = keys_ab.front();
      c.value_a = value_text(spec_a.value(c.key, json()));
      c.value_b = value_text(spec_b.value(c.key, json()));
      for (const auto& k : followers)
        c.followers.push_back(k + ": " + value_text(spec_a.value(k, json())) + " vs " +
                              value_text(spec_b.value(k, json())));
      c.welch = welch_t_test(data.groups[a].final_accs, data.groups[b].final_accs);
      if (!c.welch.valid) {
        c.verdict = "cannot tell (n=" + std::to_string(std::min(data.groups[a].n, data.groups[b].n)) + ")";
      } else {
        c.significant = c.welch.p < 0.05;
        c.verdict = c.significant ? "significant (p < 0.05)" : "not significant";
      }
      data.comparisons.push_back(c);
    }
  }
  return data;
}

}  // namespace ddplab::report
