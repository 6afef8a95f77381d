#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"
#include "ddplab/report/analysis.h"
#include "ddplab/rundir/run_reader.h"

using nlohmann::json;

namespace ddplab::report {

namespace {
// The experiment names, sorted and joined; "runs" when no run names one.
std::string title_of(const std::vector<RunData>& runs) {
  std::set<std::string> experiments;
  for (const auto& r : runs)
    if (!r.experiment.empty()) experiments.insert(r.experiment);
  return experiments.empty() ? "runs" : fmt::format("{}", fmt::join(experiments, ", "));
}
}  // namespace

json report_setting(const std::vector<RunData>& runs, const char* name) {
  for (const auto& r : runs) {
    if (!r.spec.is_object() || !r.spec.contains("report") || !r.spec["report"].is_object()) continue;
    const json& rep = r.spec["report"];
    if (rep.contains(name)) return rep[name];
  }
  return json();
}

namespace {
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
}  // namespace

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
    data.chosen = chosen_target(data);
    data.target_acc = data.chosen.acc;
    data.target_chosen = data.target_acc.has_value();
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
