// The text of one table cell, shared by the report's tables (tables.h), its prose and its CSV
// files: numbers to fixed decimals, percentages, mean +- std, a comparison's columns. A value that
// is missing (NaN, not reached) is an em dash. Internal to report/.
#pragma once
#include <cstddef>
#include <string>

#include "ddplab/report/report.h"

namespace ddplab::report {

inline constexpr const char* kDash = "\xE2\x80\x94";  // em dash: no value

std::string fixed(double v, int decimals);  // "12.35"
std::string pct(double v);                  // a fraction as "84.30%"
// "mean +- std" of `m` x `scale` with `unit` after it; a single run (n < 2) has no spread to show.
std::string pm(const MeanStd& m, int n, int decimals, double scale = 1, const char* unit = "");
std::string percent_cell(double v);            // "12%" of a value already in percent
std::string pct_pm(const MeanStd& m, int n);   // pm of a fraction, in percent to 2 decimals
const char* chosen_set(const ReportData& d);   // "validation" or "test": ReportData::on_validation
std::string target_cell(const GroupStats& g);  // "epoch 3.0, 36.0 s (2/3)" or "not reached (0/3)"
std::string efficiency_cell(const ReportData& d, const GroupStats& g);  // "0.85 (vs <baseline>)"
std::string throughput_cell(const GroupStats& g);  // mean images/s, with the range over several runs
std::string n_cell(const GroupStats& g);           // n, with the failed and the in-progress runs
std::string signed_pts(double v);                  // points to 2 decimals with a sign, never "-0.00"
std::string p_cell(double p);                      // "0.0123", "< 0.0001"
std::string diff_cell(const Comparison& c);        // "+1.23 pts"
std::string ci_cell(const Comparison& c);          // "-0.50 to +2.96"
std::string n_pairs_cell(const Comparison& c);     // "3 pairs" or "3 / 2"
std::string method_cell(const Comparison& c);      // "paired by seed", "Welch", "too few runs"
std::string metric_cell(const GroupStats& g);      // the metric, mean +- std in points over the seeds
std::string test_se_cell(const GroupStats& g);     // "+-0.37 pts (n_test 10000)"
size_t holm_family(const ReportData& d);           // the comparisons Holm's correction counted
// The method and the 95% interval of a comparison: "identical" and none for identical runs.
std::string method_cell(const GroupComparison& c);
std::string ci_cell(const GroupComparison& c);
std::string verdict_text(const GroupComparison& c);  // verdict_name, or "identical runs"
// "29%", or "75% (above the ideal 50%: outside the model)" when doubling the batch cut the steps
// by more than half (fewer samples at the larger batch, which the model does not allow).
std::string measured_saving_cell(double saved);
std::string ratio_cell(double b, double a);  // "1.85x" of b / a
// "poor: final test accuracy 24.30% under the floor 35.00% (3.5 x chance)" for a run that learnt
// little (RunData::poor), else "".
std::string poor_text(const RunData& r);
// "stopped early after epoch 5 of 10: val_loss best at epoch 3" from the manifest's "early_stop"
// (train/early_stop.h); "" for a run that early stopping did not end.
std::string early_stop_text(const RunData& r);
// "CPU wait 41%" (", steal 3%" where it is), the host's load while a group's runs trained, or
// "load not measured".
std::string host_load_text(const GroupStats& g);
// ratio_cell of B's images/s over A's; where the replica count differs and the group with more
// replicas beat the ideal (its replicas over the other's), flagged with both groups' host load.
std::string speed_ratio_cell(const GroupStats& a, const GroupStats& b);
// Which of a and b (NaN: not reached) is first by value: " (A first)", " (B first)" or "".
const char* first_by_value(double va, double vb);
// "12.3 s -> 7.1 s (B first)" for a's and b's times to the target; `first` says who was first.
std::string arrow_cell(const std::string& a, const std::string& b, double va, double vb, const char* first);

}  // namespace ddplab::report
