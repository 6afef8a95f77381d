#include <fmt/format.h>

#include "ddplab/report/page.h"
#include "ddplab/report/tables.h"

namespace ddplab::report {

namespace {
// A chart linked from Markdown, with its caption.
std::string md_figure(const NamedChart& c) {
  return fmt::format("![{}]({})\n\n{}", c.title, c.file, c.caption.empty() ? "" : md_cell(c.caption) + "\n\n");
}
}  // namespace

std::string render_markdown(const ReportData& d) { return render_markdown(d, report_charts(d)); }

std::string render_markdown(const ReportData& d, const ReportCharts& charts) {
  std::string o = fmt::format("# ddplab report: {}\n\n", md_cell(d.title));
  o += fmt::format(
      "{} runs in {} groups (runs whose resolved specs differ only in the seed); mean \xC2\xB1 std over finished runs.",
      d.runs.size(), d.groups.size());
  for (const auto& f : d.follower_notes) o += fmt::format(" `{}` (left out of the labels).", f);
  for (const auto& n : joined_settings(d)) o += fmt::format(" `{}` ({}).", n, kJoinedNote);
  o += "\n\n";
  if (!d.warnings.empty()) {
    o += "## Warnings\n\n";
    for (const auto& w : d.warnings) o += fmt::format("- {}\n", md_cell(w));
    o += "\n";
  }
  o += "## Summary: what each swept setting did\n\n";
  for (const auto& line : firsts(d)) o += fmt::format("{}\n\n", md_cell(line));
  if (const Table t = summary_table(d); t.size() > 1)
    o += fmt::format("{}\n{}\n\n", md_table(t), summary_note(d));
  else
    o += "No two groups differ in exactly one swept setting.\n\n";
  if (d.target_acc)
    o += fmt::format("### {}\n\n{}\n{}\n\n", target_title(d), md_table(target_table(d)), target_note(d));
  for (const auto& c : charts.axis) o += md_figure(c);
  o += fmt::format("## Groups\n\n{}\n\\{}\n\n", md_table(groups_table(d)), best_note(d));  // \* : not a list item
  o += "## Which differences are real?\n\n";
  if (d.comparisons.empty())
    o += "No two groups differ in exactly one setting.\n\n";
  else
    o += fmt::format("{}\n{}\n\n", md_table(comparisons_table(d)), comparisons_note(d));
  if (any_noise_scale(d))
    o += fmt::format("## Gradient noise scale: how many replicas pay off?\n\n{}\n{}\n\n",
                     md_table(noise_scale_table(d)), kNoiseScaleNote);
  if (const Table t = critical_batch_table(d); t.size() > 1)
    o += fmt::format("## Critical batch: steps to a training loss against the global batch\n\n{}\n{}\n\n", md_table(t),
                     kCriticalBatchNote);
  o += "## Charts\n\n";
  for (const auto& c : charts.epochs) o += md_figure(c);
  o += fmt::format("## Runs\n\n{}\n\\{}\n", md_table(runs_table(d)), best_note(d));
  return o;
}

}  // namespace ddplab::report
