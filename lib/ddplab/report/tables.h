// The report's tables and the prose around them, shared by report.html (html.cpp) and report.md
// (markdown.cpp): tables.cpp holds the tables and the notes under them, summary.cpp the summary
// (what each swept setting did, who reached the target first, the recommendation). Each Table
// (page.h) has its header row first. Internal to report/.
#pragma once
#include <string>
#include <vector>

#include "ddplab/report/page.h"
#include "ddplab/report/report.h"

namespace ddplab::report {

// tables.cpp

// B_simple per group with what more replicas buy (groups without a noise scale left out).
Table noise_scale_table(const ReportData& d);
extern const char* const kNoiseScaleNote;  // under it
// Under the tables with a best epoch: which set chose it.
std::string best_note(const ReportData& d);
Table groups_table(const ReportData& d);  // a row per group: accuracies, losses, target, speed
// Per group: what it took to reach the target accuracy (means over the runs that reached it).
Table target_table(const ReportData& d);
Table comparisons_table(const ReportData& d);  // a row per GroupComparison
Table runs_table(const ReportData& d);         // a row per run
// What the comparisons table is, under it.
std::string comparisons_note(const ReportData& d);
// The names of the settings made of several keys (a sweep_zip's), as the comparisons name them.
std::vector<std::string> joined_settings(const ReportData& d);
extern const char* const kJoinedNote;  // what such a setting is
// B_crit per line and target, with its interval over seeds, or why the model refuses.
Table critical_batch_table(const ReportData& d);
extern const char* const kCriticalBatchNote;  // under it

// summary.cpp

// The summary: per swept setting, what each change between neighbouring values did.
Table summary_table(const ReportData& d);
// Below the summary table: what its columns mean.
std::string summary_note(const ReportData& d);
// Which group reached the target accuracy first (wall clock), the recommendation, which groups
// with failed runs it leaves out, and which reached the target loss in the fewest steps.
std::vector<std::string> firsts(const ReportData& d);
// The heading of the time-to-target table: "Time to 84.30% test accuracy".
std::string target_title(const ReportData& d);
// Under the time-to-target table: where the target came from and what the columns are.
std::string target_note(const ReportData& d);

// charts.cpp

// Whether a group has a noise scale (or a reason it is unreliable): the noise-scale chart and table.
bool any_noise_scale(const ReportData& d);

}  // namespace ddplab::report
