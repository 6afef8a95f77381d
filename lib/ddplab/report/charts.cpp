#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "ddplab/report/svg.h"
#include "ddplab/report/tables.h"

namespace ddplab::report {

namespace {
// The x of a per-epoch chart.
enum class EpochX { kEpoch, kSteps, kSamples, kWall };

double x_of_record(EpochX x, const rundir::EpochRecord& e) {
  switch (x) {
    case EpochX::kEpoch:
      return e.epoch;
    case EpochX::kSteps:
      return static_cast<double>(e.step);
    case EpochX::kSamples:  // in thousands
      return static_cast<double>(e.step) * static_cast<double>(e.global_batch) / 1000;
    case EpochX::kWall:
      return e.wall_s;
  }
  return std::nan("");
}

struct ChartDef {
  const char* id;
  const char* title;
  const char* x_label;
  const char* y_label;
  double (*y)(const rundir::EpochRecord&);  // in the record's units
  EpochX x;
  bool percent;     // an accuracy: drawn in percent, like the tables
  bool validation;  // drawn only when the runs have a validation split
};

const char* const kAtEpochs = "Each point is an epoch, at the mean over the group's runs of x and of y.";

double test_acc(const rundir::EpochRecord& e) { return e.test_acc; }

double test_loss(const rundir::EpochRecord& e) { return e.test_loss; }

const ChartDef kCharts[] = {
    {"test_acc", "Test accuracy vs epoch", "epoch", "test accuracy (%)", test_acc, EpochX::kEpoch, true, false},
    {"val_acc", "Validation accuracy vs epoch", "epoch", "validation accuracy (%)",
     [](const rundir::EpochRecord& e) { return or_nan(e.val_acc); }, EpochX::kEpoch, true, true},
    {"test_acc_steps", "Test accuracy vs optimizer steps", "optimizer steps (mean over seeds)", "test accuracy (%)",
     test_acc, EpochX::kSteps, true, false},
    {"test_acc_samples", "Test accuracy vs training samples seen",
     "training samples seen, thousands (steps \xC3\x97 global batch; mean over seeds)", "test accuracy (%)", test_acc,
     EpochX::kSamples, true, false},
    {"test_acc_wall", "Test accuracy vs wall-clock time", "wall-clock seconds (mean over seeds)", "test accuracy (%)",
     test_acc, EpochX::kWall, true, false},
    {"train_loss", "Training loss vs epoch", "epoch", "training loss",
     [](const rundir::EpochRecord& e) { return e.train_loss; }, EpochX::kEpoch, false, false},
    {"test_loss", "Test loss vs epoch", "epoch", "test loss", test_loss, EpochX::kEpoch, false, false},
    {"test_loss_samples", "Test loss vs training samples seen",
     "training samples seen, thousands (steps \xC3\x97 global batch; mean over seeds)", "test loss", test_loss,
     EpochX::kSamples, false, false},
    {"lr", "Learning rate vs epoch", "epoch", "learning rate (last step of the epoch)",
     [](const rundir::EpochRecord& e) { return e.lr; }, EpochX::kEpoch, false, false},
};

// One series per group, in the group's colour: at each epoch the mean over the group's runs of y
// (and of x), with the min..max band of y. x_of / y_of read run r's i-th record; non-finite values
// are left out.
using PointFn = std::function<double(const RunData&, size_t)>;
ChartSeries group_series(const ReportData& d, const GroupStats& g, const PointFn& x_of, const PointFn& y_of) {
  std::map<int, std::vector<double>> ys, xs;
  for (size_t ri : g.runs) {
    const RunData& r = d.runs[ri];
    for (size_t i = 0; i < r.epochs.size(); ++i) {
      const double y = y_of(r, i);
      if (!std::isfinite(y)) continue;
      ys[r.epochs[i].epoch].push_back(y);
      xs[r.epochs[i].epoch].push_back(x_of(r, i));
    }
  }
  ChartSeries s;
  s.colour = static_cast<int>(&g - d.groups.data());
  s.label = fmt::format("{}{}", g.label, g.n == 0 && g.in_progress > 0 ? " (in progress)" : "");
  for (const auto& [epoch, v] : ys) {
    const double x = mean(xs[epoch]);
    if (!std::isfinite(x)) continue;
    s.x.push_back(x);
    s.y.push_back(mean(v));
    s.lo.push_back(*std::min_element(v.begin(), v.end()));
    s.hi.push_back(*std::max_element(v.begin(), v.end()));
  }
  return s;
}

double epoch_of(const RunData& r, size_t i) { return r.epochs[i].epoch; }

// Bytes communicated up to and including record i (NaN when a record lacks the field).
double cumulative_comm_bytes(const RunData& r, size_t i) {
  double total = 0;
  for (size_t k = 0; k <= i; ++k) {
    const auto& bytes = r.epochs[k].comm_bytes;
    total += bytes ? static_cast<double>(*bytes) : std::numeric_limits<double>::quiet_NaN();
  }
  return total;
}
}  // namespace

bool any_noise_scale(const ReportData& d) {
  return std::any_of(d.groups.begin(), d.groups.end(), [](const GroupStats& g) {
    return std::isfinite(g.noise_scale_last) || !g.noise_scale_unreliable.empty();
  });
}

namespace {
// The training loss of each log.every_steps interval vs epochs done (steps.jsonl): per group the
// mean over its runs of the records at the same step, with the min..max band.
ChartSeries steps_series(const ReportData& d, const GroupStats& g) {
  std::map<int64_t, std::vector<double>> ys, xs;
  for (size_t ri : g.runs)
    for (const auto& r : d.runs[ri].steps)
      if (std::isfinite(r.train_loss)) ys[r.step].push_back(r.train_loss), xs[r.step].push_back(r.epoch);
  ChartSeries s;
  s.label = g.label;
  s.colour = static_cast<int>(&g - d.groups.data());
  s.markers = false;
  for (const auto& [step, v] : ys) {
    s.x.push_back(mean(xs[step]));
    s.y.push_back(mean(v));
    s.lo.push_back(*std::min_element(v.begin(), v.end()));
    s.hi.push_back(*std::max_element(v.begin(), v.end()));
  }
  return s;
}

bool any_steps(const ReportData& d) {
  return std::any_of(d.runs.begin(), d.runs.end(), [](const RunData& r) { return !r.steps.empty(); });
}

bool any_comm_bytes(const ReportData& d) {
  return std::any_of(d.groups.begin(), d.groups.end(), [](const GroupStats& g) { return g.comm_bytes > 0; });
}
}  // namespace

std::vector<NamedChart> render_charts(const ReportData& d) {
  std::vector<NamedChart> out;
  for (const auto& def : kCharts) {
    if (def.validation && !d.on_validation) continue;
    LineChart chart = line_chart(def.id, def.title, def.x_label, def.y_label);
    chart.integer_x = def.x == EpochX::kEpoch;
    if (def.percent) chart.y_floor = 0, chart.y_ceil = 100;
    const PointFn x_of = [&](const RunData& r, size_t i) { return x_of_record(def.x, r.epochs[i]); };
    const PointFn y_of = [&](const RunData& r, size_t i) { return (def.percent ? 100 : 1) * def.y(r.epochs[i]); };
    for (const auto& g : d.groups) chart.series.push_back(group_series(d, g, x_of, y_of));
    out.push_back({fmt::format("{}.svg", def.id), def.title, render_svg(chart),
                   def.x == EpochX::kEpoch ? std::string() : std::string(kAtEpochs)});
  }
  if (any_steps(d)) {
    LineChart chart = line_chart("steps_train_loss", "Training loss per step interval (log.every_steps) vs epoch",
                                 "epochs done", "training loss over the interval, all replicas");
    for (const auto& g : d.groups) chart.series.push_back(steps_series(d, g));
    out.push_back({"steps_train_loss.svg", chart.title, render_svg(chart), ""});
  }
  if (any_noise_scale(d)) {
    LineChart chart =
        line_chart("noise_scale", "Gradient noise scale B_simple vs epoch (dotted: the group's global batch)", "epoch",
                   "B_simple (samples, log scale)");
    chart.log_y = true;
    chart.integer_x = true;
    for (const auto& g : d.groups) {
      if (!std::isfinite(g.noise_scale_last) && g.noise_scale_unreliable.empty()) continue;
      auto s =
          group_series(d, g, epoch_of, [](const RunData& r, size_t i) { return or_nan(r.epochs[i].grad_noise_scale); });
      s.label += fmt::format(" (global batch {})", g.global_batch);
      s.reference_y = static_cast<double>(g.global_batch);
      chart.series.push_back(std::move(s));
    }
    out.push_back({"noise_scale.svg", chart.title, render_svg(chart), ""});
  }
  if (any_comm_bytes(d)) {
    LineChart chart = line_chart("test_acc_comm", "Test accuracy vs bytes communicated per rank",
                                 "MB sent by rank 0 so far (gradient and parameter collectives)", "test accuracy (%)");
    chart.y_floor = 0, chart.y_ceil = 100;
    for (const auto& g : d.groups)
      chart.series.push_back(group_series(
          d, g, [](const RunData& r, size_t i) { return cumulative_comm_bytes(r, i) / 1e6; },
          [](const RunData& r, size_t i) { return 100 * r.epochs[i].test_acc; }));
    out.push_back({"test_acc_comm.svg", chart.title, render_svg(chart), kAtEpochs});
  }
  return out;
}

ReportCharts report_charts(const ReportData& d) { return {render_charts(d), axis_charts(d)}; }

}  // namespace ddplab::report
