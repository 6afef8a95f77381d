// The steps of analyze() (report.h), one concern per file: grouping.cpp puts the runs into groups
// and names them, group_stats.cpp computes each group's statistics, comparisons.cpp compares the
// groups, decide.cpp holds what the report decides from them (the chosen target, the
// recommendation, the verdicts), analyze.cpp reads the report's settings and runs the steps in
// order. Internal to report/: front ends use report.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/report/report.h"

namespace ddplab::report {

// grouping.cpp

// Settings ddplab derives from another one when left "auto" (the thread budget is split over the
// replicas; the backend follows the device), follower -> leader as dotted keys: groups that differ
// in both differ in one choice. The schema's "follows" (config/field_roles.h) declares them.
const std::map<std::string, std::string>& leaders();
// The run's spec seed; 0 without a spec.
int64_t seed_of(const RunData& r);
// Groups the runs by their spec without seed (a run without a spec is alone), setting each run's
// group; returns each group's key (its flattened spec, dotted keys), by group index.
std::vector<nlohmann::json> group_runs(ReportData& data);
// The keys whose values differ across the groups' keys, sorted.
std::vector<std::string> differing_keys(const std::vector<nlohmann::json>& keys);
// The differing keys that only follow another differing key (replicas.threads with
// replicas.count, replicas.backend with replicas.device): across the groups each value of the
// leader comes with one value of the follower, so the leader's value names it.
std::vector<std::string> following_keys(const std::vector<nlohmann::json>& keys,
                                        const std::vector<std::string>& differing);
// The differing keys but `followers` as settings: keys whose values split the groups alike (the
// same groups share a value of each) are one setting.
std::vector<Setting> swept_settings(const std::vector<nlohmann::json>& keys, const std::vector<std::string>& differing,
                                    const std::vector<std::string>& followers);
// The group's values of the differing keys and its label. Keys this group does not set are left
// out of its label ("replicas.sync=allreduce" rather than also
// "replicas.sync.local_sgd.period=(unset)"), unless it sets none of them.
void label_group(const ReportData& data, const std::vector<std::string>& followers, GroupStats& g);
// Sorts the groups by their differing values and renumbers the runs' groups.
void sort_groups(ReportData& data);
// The differing keys in which groups a and b differ.
std::vector<std::string> keys_between(const ReportData& data, const GroupStats& a, const GroupStats& b);
// "replicas.threads follows replicas.count", for the report's opening.
std::vector<std::string> follower_notes(const std::vector<std::string>& followers);

// group_stats.cpp

// Whether every run with records has a validation accuracy in each of them (and one run has records).
bool every_record_has_validation(const std::vector<RunData>& runs);
// Fills g's statistics (GroupStats) from its runs; data's settings (target, final_epochs, ...) set.
void group_statistics(const ReportData& data, GroupStats& g);
// GroupStats::measured_steps_saved of every group: the steps to report.target_loss that doubling
// the global batch saved, against a group that differs only in how the batch is made.
void measured_steps_saved(ReportData& data);
// GroupStats::scaling_efficiency of every group, against the closest 1-replica group with the
// same per-replica batch.
void scaling_efficiency(ReportData& data);
// One warning naming every finished run whose host load (CPU wait or steal) was above
// kHostLoadFlagPts, and one for each finished run whose load differs from the median of its
// group's finished runs by more than kHostLoadFlagPts (of two runs, both when they differ by twice
// that: which one is off cannot be told).
void host_load_warnings(ReportData& data);

// comparisons.cpp

// ReportData::comparisons: every pair of groups that differs in one setting and every planned
// contrast of the specs (report.contrasts) not already among them, Holm-corrected over all of
// them, each with its sentence.
void compare_groups(ReportData& data);

// decide.cpp

// The group's mean wall seconds to the target accuracy; NaN when no run reached it.
double time_to_target(const GroupStats& g);
// Whether a reached the target accuracy before b beyond the spread of their runs: a's slowest run
// that reached it got there before b's fastest (a group that never reached it is later than any).
bool first_beyond_spread(const GroupStats& a, const GroupStats& b);

// analyze.cpp

// report.<name> of the first run's spec that sets it, else null.
nlohmann::json report_setting(const std::vector<RunData>& runs, const char* name);

}  // namespace ddplab::report
