#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "ddplab/report/cells.h"
#include "ddplab/report/report.h"

namespace ddplab::report {

namespace {
std::string csv_num(double v) { return std::isfinite(v) ? fmt::format("{:.10g}", v) : ""; }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A CSV file's columns: each its header and its cell of one row, so that the order is written once.
template <typename Row>
using CsvColumns = std::vector<std::pair<std::string, std::function<std::string(const Row&)>>>;

template <typename Row>
std::string render_csv(const CsvColumns<Row>& columns, const std::vector<Row>& rows) {
  std::string o;
  for (size_t i = 0; i < columns.size(); ++i) o += fmt::format("{}{}", i > 0 ? "," : "", columns[i].first);
  o += '\n';
  for (const Row& row : rows) {
    for (size_t i = 0; i < columns.size(); ++i) o += fmt::format("{}{}", i > 0 ? "," : "", columns[i].second(row));
    o += '\n';
  }
  return o;
}

template <typename T>
std::string csv_int(T v) {
  return fmt::format("{}", v);
}

template <typename T>
std::string csv_optional(const std::optional<T>& v) {
  if constexpr (std::is_floating_point_v<T>)
    return v ? csv_num(*v) : "";
  else
    return v ? csv_int(*v) : "";
}

// Where the run reached its group's target, if it did.
std::optional<TargetPoint> target_point(const ReportData& d, const RunData& r) {
  const GroupStats& g = d.groups[r.group];
  return g.target_acc ? r.reaching(*g.target_acc, d.on_validation) : std::nullopt;
}

CsvColumns<RunData> summary_columns(const ReportData& d) {
  return {
      {"experiment", [](const RunData& r) { return csv_field(r.experiment); }},
      {"run_id", [](const RunData& r) { return csv_field(r.run_id); }},
      {"group", [&](const RunData& r) { return csv_field(d.groups[r.group].label); }},
      {"status", [](const RunData& r) { return csv_field(r.status_name); }},
      {"message", [](const RunData& r) { return csv_field(r.message); }},
      {"seed",
       [](const RunData& r) {
         return r.spec.is_object() && r.spec.contains("seed") ? r.spec["seed"].dump() : std::string();
       }},
      {"replicas", [](const RunData& r) { return csv_int(r.replicas()); }},
      {"per_replica_batch", [](const RunData& r) { return csv_int(r.per_replica_batch()); }},
      {"epochs", [](const RunData& r) { return csv_int(r.epochs.size()); }},
      {"final_test_acc", [](const RunData& r) { return csv_num(r.final_test_acc()); }},
      {"best_test_acc", [](const RunData& r) { return csv_num(r.best_test_acc()); }},
      {"final_train_loss", [](const RunData& r) { return csv_num(r.final_train_loss()); }},
      {"final_test_loss", [](const RunData& r) { return csv_num(r.final_test_loss()); }},
      {"images_per_s", [](const RunData& r) { return csv_num(r.mean_images_per_s()); }},
      {"target_epoch",
       [&](const RunData& r) {
         const auto t = target_point(d, r);
         return !t ? "" : t->point ? csv_num(t->epoch) : csv_int(static_cast<int>(t->epoch));
       }},
      {"target_wall_s",
       [&](const RunData& r) {
         const auto t = target_point(d, r);
         return t ? csv_num(t->wall_s) : "";
       }},
      {"host_cpu_wait_pct", [](const RunData& r) { return csv_num(r.mean_host_cpu_wait_pct()); }},
      {"host_steal_pct", [](const RunData& r) { return csv_num(r.mean_host_steal_pct()); }},
      {"dir", [](const RunData& r) { return csv_field(r.dir.string()); }},
  };
}

// groups.csv's columns after the group's label and its values of the differing keys.
CsvColumns<GroupStats> groups_stats_columns() {
  using G = const GroupStats&;
  return {
      {"n", [](G g) { return csv_int(g.n); }},
      {"in_progress", [](G g) { return csv_int(g.in_progress); }},
      {"final_test_acc_mean", [](G g) { return csv_num(g.final_test_acc.mean); }},
      {"final_test_acc_std", [](G g) { return csv_num(g.final_test_acc.std); }},
      {"best_test_acc_mean", [](G g) { return csv_num(g.best_test_acc.mean); }},
      {"best_test_acc_std", [](G g) { return csv_num(g.best_test_acc.std); }},
      {"final_train_loss_mean", [](G g) { return csv_num(g.final_train_loss.mean); }},
      {"final_train_loss_std", [](G g) { return csv_num(g.final_train_loss.std); }},
      {"final_test_loss_mean", [](G g) { return csv_num(g.final_test_loss.mean); }},
      {"final_test_loss_std", [](G g) { return csv_num(g.final_test_loss.std); }},
      {"target_acc", [](G g) { return csv_optional(g.target_acc); }},
      {"target_reached", [](G g) { return g.target_acc ? csv_int(g.target_reached) : ""; }},
      {"target_epochs_mean", [](G g) { return csv_num(g.target_epochs); }},
      {"target_wall_s_mean", [](G g) { return csv_num(g.target_wall_s); }},
      {"images_per_s", [](G g) { return csv_num(g.images_per_s); }},
      {"replicas", [](G g) { return csv_int(g.replicas); }},
      {"per_replica_batch", [](G g) { return csv_int(g.per_replica_batch); }},
      {"global_batch", [](G g) { return csv_int(g.global_batch); }},
      {"grad_noise_scale_first", [](G g) { return csv_num(g.noise_scale_first); }},
      {"grad_noise_scale_last", [](G g) { return csv_num(g.noise_scale_last); }},
      {"comm_bytes", [](G g) { return csv_num(g.comm_bytes); }},
      {"scaling_efficiency", [](G g) { return csv_optional(g.scaling_efficiency); }},
      {"test_samples", [](G g) { return csv_optional(g.test_samples); }},
      {"test_set_se_pts", [](G g) { return csv_num(g.test_sampling_error_pts); }},
      {"collapsed", [](G g) { return csv_int(g.collapsed); }},
      {"diverged", [](G g) { return csv_int(g.diverged); }},
      {"poor", [](G g) { return csv_int(g.poor); }},
      {"target_steps_mean", [](G g) { return csv_num(g.target_steps); }},
      {"target_samples_mean", [](G g) { return csv_num(g.target_samples); }},
      {"target_device_s_mean", [](G g) { return csv_num(g.target_device_s); }},
      {"steps_per_epoch", [](G g) { return csv_num(g.effective.steps_per_epoch); }},
      {"lr_first", [](G g) { return csv_num(g.effective.lr_first); }},
      {"lr_peak", [](G g) { return csv_num(g.effective.lr_peak); }},
      {"lr_spec", [](G g) { return csv_num(g.effective.lr_spec); }},
      {"lr_scaled", [](G g) { return csv_num(g.effective.lr_scaled); }},
      {"lr_scheduled_peak", [](G g) { return csv_num(g.effective.lr_scheduled_peak); }},
      {"host_cpu_wait_pct", [](G g) { return csv_num(g.host_cpu_wait_pct); }},
      {"chosen_val_acc_mean", [](G g) { return csv_num(g.chosen_val_acc.mean); }},
      {"chosen_test_acc_mean", [](G g) { return csv_num(g.chosen_test_acc.mean); }},
  };
}

CsvColumns<GroupStats> groups_columns(const ReportData& d) {
  CsvColumns<GroupStats> columns = {{"group", [](const GroupStats& g) { return csv_field(g.label); }}};
  for (const auto& k : d.differing_keys)
    columns.push_back({csv_field(k), [k](const GroupStats& g) {
                         const auto& v = g.values.contains(k) ? g.values[k] : nlohmann::json();
                         return csv_field(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump());
                       }});
  for (auto& column : groups_stats_columns()) columns.push_back(std::move(column));
  return columns;
}

CsvColumns<GroupComparison> comparisons_columns(const ReportData& d) {
  using C = const GroupComparison&;
  const auto a = [&](C c) -> const GroupStats& { return d.groups[c.a]; };
  const auto b = [&](C c) -> const GroupStats& { return d.groups[c.b]; };
  const std::string metric =
      d.final_epochs > 1 ? fmt::format("test_acc_last_{}_epochs", d.final_epochs) : std::string("final_test_acc");
  return {
      {"key", [](C c) { return csv_field(c.key); }},
      {"value_a", [](C c) { return csv_field(c.value_a); }},
      {"value_b", [](C c) { return csv_field(c.value_b); }},
      {"group_a", [=](C c) { return csv_field(a(c).label); }},
      {"group_b", [=](C c) { return csv_field(b(c).label); }},
      {"metric", [=](C) { return metric; }},
      {"a_mean_pts", [=](C c) { return csv_num(a(c).metric.mean); }},
      {"b_mean_pts", [=](C c) { return csv_num(b(c).metric.mean); }},
      {"diff_pts", [](C c) { return csv_num(c.stats.diff); }},
      {"ci95_low", [](C c) { return csv_num(c.stats.ci_low); }},
      {"ci95_high", [](C c) { return csv_num(c.stats.ci_high); }},
      {"n_pairs", [](C c) { return csv_int(c.stats.n_pairs); }},
      {"n_a", [](C c) { return csv_int(c.stats.n_a); }},
      {"n_b", [](C c) { return csv_int(c.stats.n_b); }},
      {"method", [](C c) { return csv_field(method_cell(c)); }},
      {"p", [](C c) { return csv_num(c.stats.p); }},
      {"p_adjusted", [](C c) { return csv_num(c.stats.p_adjusted); }},
      {"m", [](C c) { return csv_int(c.stats.m); }},
      {"verdict", [](C c) { return csv_field(verdict_text(c)); }},
      {"sentence", [](C c) { return csv_field(c.sentence); }},
      {"borderline", [](C c) { return std::string(c.stats.borderline ? "true" : "false"); }},
      {"equivalence_seeds", [](C c) { return csv_optional(c.stats.equivalence_seeds); }},
      {"ci90_low", [](C c) { return csv_num(c.stats.ci90_low); }},
      {"ci90_high", [](C c) { return csv_num(c.stats.ci90_high); }},
      {"bad_runs_p", [](C c) { return csv_optional(c.bad_runs_p); }},
      {"effective", [=](C c) { return csv_field(effective_change(a(c).effective, b(c).effective)); }},
  };
}
}  // namespace

std::string render_summary_csv(const ReportData& d) { return render_csv(summary_columns(d), d.runs); }

std::string render_groups_csv(const ReportData& d) { return render_csv(groups_columns(d), d.groups); }

std::string render_comparisons_csv(const ReportData& d) { return render_csv(comparisons_columns(d), d.comparisons); }

}  // namespace ddplab::report
