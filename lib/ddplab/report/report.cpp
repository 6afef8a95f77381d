#include "ddplab/report/report.h"

#include <filesystem>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"

namespace fs = std::filesystem;

namespace ddplab::report {

ReportSummary write_report(const ReportOptions& options) {
  ReportSummary summary;
  summary.data = analyze(options);
  const ReportData& d = summary.data;
  for (const auto& w : d.warnings) fmt::print(stderr, "warning: {}\n", w);
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (!fs::is_directory(options.out_dir))
    throw Error(fmt::format("{}: cannot create the report directory{}", options.out_dir.string(),
                            ec ? fmt::format(": {}", ec.message()) : ""));
  auto put = [&](const std::string& name, const std::string& text) {
    const fs::path file = options.out_dir / name;
    rundir::write_file_atomic(file, text);
    summary.files.push_back(file);
  };
  const ReportCharts charts = report_charts(d);
  put("report.html", render_html(d, charts));
  put("report.md", render_markdown(d, charts));
  put("summary.csv", render_summary_csv(d));
  put("groups.csv", render_groups_csv(d));
  put("comparisons.csv", render_comparisons_csv(d));
  for (const auto& c : charts.epochs) put(c.file, c.svg);
  for (const auto& c : charts.axis) put(c.file, c.svg);
  summary.runs = d.runs.size();
  summary.groups = d.groups.size();
  summary.warnings = d.warnings;
  return summary;
}

}  // namespace ddplab::report
