#include <fmt/format.h>

#include "ddplab/report/page.h"
#include "ddplab/report/svg.h"
#include "ddplab/report/tables.h"

namespace ddplab::report {

namespace {
// The opening paragraph of the HTML report: what a group is and which keys the groups differ in.
std::string html_intro(const ReportData& d) {
  std::string o = fmt::format(
      "<p>{} runs in {} groups. A group is the runs whose resolved specs differ only in the seed; mean \xC2\xB1 "
      "standard deviation are over its finished runs (n).",
      d.runs.size(), d.groups.size());
  if (!d.differing_keys.empty()) {
    o += " Groups differ in: ";
    for (size_t i = 0; i < d.differing_keys.size(); ++i)
      o += fmt::format("{}<code>{}</code>", i ? ", " : "", escape_html(d.differing_keys[i]));
    o += '.';
  }
  for (const auto& f : d.follower_notes) o += fmt::format(" <code>{}</code> (left out of the labels).", escape_html(f));
  for (const auto& n : joined_settings(d)) o += fmt::format(" <code>{}</code> ({}).", escape_html(n), kJoinedNote);
  return o + "</p>\n";
}

std::string html_warnings(const ReportData& d) {
  if (d.warnings.empty()) return "";
  std::string o = "<h2>Warnings</h2>\n<ul class=\"warnings\">\n";
  for (const auto& w : d.warnings) o += fmt::format("<li>{}</li>\n", escape_html(w));
  return o + "</ul>\n";
}

// A chart with its caption.
std::string html_figure(const NamedChart& c, const char* cls) {
  const std::string caption =
      c.caption.empty() ? std::string() : fmt::format("<figcaption>{}</figcaption>\n", escape_html(c.caption));
  return fmt::format("<figure{}>\n{}{}</figure>\n", *cls ? fmt::format(" class=\"{}\"", cls) : "", c.svg, caption);
}

// The arms' colours, the same in every chart.
std::string html_colour_key(const ReportData& d) {
  std::string o = "<p class=\"colour-key\">Colours, the same in every chart:";
  for (size_t i = 0; i < d.groups.size(); ++i) {
    // Past the palette a colour repeats and the group's lines are dashed: so is its swatch.
    const std::string fill =
        palette_repeats(i) ? fmt::format("repeating-linear-gradient(90deg,{} 0 6px,#ffffff 6px 9px)", palette_colour(i))
                           : palette_colour(i);
    o += fmt::format(" <span class=\"arm\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>", fill,
                     escape_html(d.groups[i].label));
  }
  return o + " (grey: a line over several groups).</p>\n";
}

// The answer first: what each swept setting did, then the charts against the swept settings.
std::string html_summary(const ReportData& d, const std::vector<NamedChart>& charts) {
  std::string o = "<h2 id=\"summary\">Summary: what each swept setting did</h2>\n";
  for (const auto& line : firsts(d)) o += fmt::format("<p class=\"first\">{}</p>\n", escape_html(line));
  const Table t = summary_table(d);
  if (t.size() > 1)
    o += html_table(t, "summary") + fmt::format("<p class=\"note\">{}</p>\n", escape_html(summary_note(d)));
  else
    o += "<p>No two groups differ in exactly one swept setting.</p>\n";
  if (d.target_acc)
    o += fmt::format("<h3 id=\"to-target\">{}</h3>\n{}<p class=\"note\">{}</p>\n", escape_html(target_title(d)),
                     html_table(target_table(d), "to-target"), escape_html(target_note(d)));
  if (charts.empty()) return o;
  o += "<h2 id=\"axis-charts\">Against the swept settings</h2>\n";
  for (const auto& c : charts) o += html_figure(c, "axis");
  return o;
}

// The groups, their comparisons and, when logged, the noise scale.
std::string html_tables(const ReportData& d) {
  std::string o = fmt::format("<h2>Groups</h2>\n{}", html_table(groups_table(d), "groups"));
  o += fmt::format(
      "<p class=\"note\">{} Test-set SE is the sampling error sqrt(p (1 - p) / n_test) the test set alone "
      "puts on the final accuracy p, in points: seeds cannot shrink it.</p>\n",
      escape_html(best_note(d)));
  o += "<p class=\"note\">Scaling efficiency is thr(N) / (N \xC3\x97 thr(1)) against the 1-replica group with the "
       "same per-replica batch. Time to target is the first epoch whose accuracy (the set that chooses) reaches the "
       "target (mean over "
       "the runs that reached it).</p>\n";
  o += "<h2>Which differences are real?</h2>\n";
  if (d.comparisons.empty()) {
    o += "<p>No two groups differ in exactly one setting.</p>\n";
  } else {
    o += html_table(comparisons_table(d), "significance");
    o += fmt::format("<p class=\"note\">{}</p>\n", escape_html(comparisons_note(d)));
  }
  if (any_noise_scale(d)) {
    o += fmt::format("<h2>Gradient noise scale: how many replicas pay off?</h2>\n{}",
                     html_table(noise_scale_table(d), "noise-scale"));
    o += fmt::format("<p class=\"note\">{}</p>\n", escape_html(kNoiseScaleNote));
  }
  if (const Table t = critical_batch_table(d); t.size() > 1)
    o += fmt::format(
        "<h2>Critical batch: steps to a training loss against the global batch</h2>\n{}<p class=\"note\">{}</p>\n",
        html_table(t, "critical-batch"), escape_html(kCriticalBatchNote));
  return o;
}
}  // namespace

std::string render_html(const ReportData& d) { return render_html(d, report_charts(d)); }

std::string render_html(const ReportData& d, const ReportCharts& charts) {
  std::string o = html_page_start(fmt::format("ddplab report: {}", d.title));
  o += fmt::format("<h1>ddplab report: {}</h1>\n", escape_html(d.title));
  o += html_intro(d);
  o += html_colour_key(d);
  o += html_warnings(d);
  o += html_summary(d, charts.axis);
  o += html_tables(d);
  o += "<h2>Charts</h2>\n<p class=\"note\">Lines are the mean over a group's runs; the shaded band spans the "
       "minimum to maximum over seeds.</p>\n";
  for (const auto& c : charts.epochs) o += html_figure(c, "");
  o += fmt::format("<h2>Runs</h2>\n{}<p class=\"note\">{}</p>\n", html_table(runs_table(d), "runs"),
                   escape_html(best_note(d)));
  return o + html_page_end();
}

}  // namespace ddplab::report
