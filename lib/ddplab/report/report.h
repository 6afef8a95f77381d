// The comparison report over run directories (`ddplab report DIR...`, also written at the end
// of a sweep). Reads only files (spec.json, manifest.json, epochs.jsonl; see ddplab/rundir/layout.h),
// never links the trainer.
//
// The report opens with a summary per swept setting: who reached the target first and the
// recommendation (recommend), then each change of one setting between neighbouring values
// (summary_changes) with what it changed in effect (effective_change), the accuracy comparison,
// the throughput ratio and the times to target, and the time-to-target table; then the charts
// against the swept settings (axis_charts), then tables and per-epoch charts.
//
// Runs are found below every input (a directory holding manifest.json is a run; otherwise its
// subdirectories are searched recursively). Runs whose spec.json is equal once the fields whose role
// does not group runs are removed (config/field_roles.h: seed, name, output, report.*, and how the
// runs were launched: slurm.*, replicas.timeout_s, ...) form a group. A group's label names the dotted keys
// whose values differ between groups ("replicas.count=2, schedule.scale_rule=linear"; the objects of
// an array such as model.layers indexed as a sweep names them, "model.layers.0.channels=32"); with one
// group it is the experiment name. Keys that always change together form one setting (Setting). A differing key that
// only follows another one (replicas.threads with replicas.count, replicas.backend with replicas.device: one value of
// it per value of the other) is named once in the report's opening instead of in every label, and the specs'
// report.labels map (label -> display name) renames groups. Statistics use the runs whose manifest says "done" (n);
// runs still "running" are listed as "in progress", failed/interrupted ones with their message, a status ddplab does
// not write as it is spelled, and all runs with records are drawn in the charts.
//
// write_report writes into out_dir (created): report.html (self-contained: inline CSS and SVG,
// no scripts, no external fetches), report.md (the same tables; charts linked as files),
// summary.csv (a row per run), groups.csv (a row per group), comparisons.csv (a row per
// comparison) and one SVG per chart:
// test_acc.svg, train_loss.svg, test_loss.svg, lr.svg, test_acc_steps.svg, test_acc_samples.svg,
// test_loss_samples.svg (x: optimizer steps; samples seen, step x global batch), test_acc_wall.svg,
// val_acc.svg (when ReportData::on_validation), plus, when the records
// have them, steps_train_loss.svg (training loss per log.every_steps interval vs epoch, from
// steps.jsonl), the axis charts (acc_vs_batch.svg, throughput_vs_replicas.svg,
// target_time_vs_replicas.svg, batch_tradeoff.svg; see axis_charts), noise_scale.svg (B_simple per group vs epoch on a
// log axis, the group's global batch dashed, with a sentence per group on what more replicas buy; docs/beyond.md) and
// test_acc_comm.svg (test accuracy vs the bytes communicated so far). Accuracies are
// fractions in [0, 1] (shown as percentages in HTML/Markdown and the charts). Each group has one
// palette colour (its index) in every chart.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/report/compare.h"
#include "ddplab/report/stats.h"
#include "ddplab/rundir/run_data.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::report {

struct ReportOptions {
  std::vector<std::filesystem::path> inputs;  // run directories or directories above them
  std::filesystem::path out_dir;              // where the files go; created if missing
  std::optional<double> target_acc;           // fraction; default: the specs' report.target_acc, else none
  std::optional<double> equivalence_pts;      // default: the specs' report.equivalence_pts, else 0.5
  std::optional<int> final_epochs;            // default: the specs' report.final_epochs, else 1
  std::optional<double> target_loss;          // default: the specs' report.target_loss, else none
};

// A run's own measures are rundir's (rundir/run_data.h), named here as the report uses them.
using rundir::kLossWindowSamples;
using rundir::or_nan;
using rundir::RunHealth;
using rundir::selection_acc;
using rundir::TargetPoint;

// The settings that make up the global batch: a line over the global batch pools the groups that
// reach one batch through different splits (2 x 64 and 1 x 128).
inline const std::vector<std::string> kBatchKeys = {"replicas.count", "batch.per_replica", "batch.global"};

// A finished run whose mean host CPU wait or steal (percent) is above this, or differs from the
// median of its group's finished runs by more than this many points, is named in the report's
// warnings: its speed figures measure the machine's load, not its setting.
constexpr double kHostLoadFlagPts = 10;

// A run as the report holds it: rundir::RunData (read by rundir::read_run) and its group.
struct RunData : rundir::RunData {
  size_t group = 0;  // index into ReportData::groups
};

struct MeanStd {
  double mean = 0, std = 0;  // NaN when n == 0; std 0 when n == 1
};

// What a group's runs did, read from their records rather than the spec (the first finished run
// with records; NaN / 0 when none): what a change of a setting changed in effect.
struct EffectiveSettings {
  int64_t global_batch = 0;          // 0: no records
  double steps_per_epoch = 0;        // the last record's step / its epoch
  double lr_first = 0, lr_peak = 0;  // the lr of the first record, and the highest of any record
  // The lr as scheduled (manifest.json's "lr_schedule", train/lr_schedule.h): the spec's
  // optimizer.lr, it times the scale rule's factor, and the highest lr of any step; NaN for a run
  // written before the manifest held it (then the records' lr_first / lr_peak speak).
  double lr_spec = std::numeric_limits<double>::quiet_NaN(), lr_scaled = std::numeric_limits<double>::quiet_NaN(),
         lr_scheduled_peak = std::numeric_limits<double>::quiet_NaN();
  bool scheduled() const;  // whether lr_spec, lr_scaled and lr_scheduled_peak are known
};
// "global batch 64 -> 128, steps/epoch 187 -> 94, lr unchanged" (arrows as U+2192; a group without
// records gives an em dash): the effective differences from a to b, each "unchanged" when equal.
// The lr, where both runs' manifests hold their schedule: "lr 0.05 (spec, unchanged), scaled
// 0.05 -> 0.2, peak 0.0467 -> 0.187 as scheduled", the scaled part left out when no rule scaled
// either, the peak when it equals the scaled lr in both (no warmup or decay moved it). Else from
// the records, which sample the lr at each epoch's last step: "lr 0.05 -> 0.1 at the end of epoch
// 1, highest recorded 0.1 -> 0.2".
std::string effective_change(const EffectiveSettings& a, const EffectiveSettings& b);

struct GroupStats {
  std::string label;         // e.g. "replicas.count=2, schedule.scale_rule=linear"
  nlohmann::json values;     // the differing keys -> this group's values (object; dotted keys)
  nlohmann::json key_spec;   // the flattened spec that defines the group
  std::vector<size_t> runs;  // indices into ReportData::runs, by seed
  int n = 0;                 // finished runs with at least one record that did not collapse (RunHealth::kOk)
  int collapsed = 0;         // finished runs near chance, left out of every statistic but their count
  int diverged = 0;          // runs that diverged, likewise
  int poor = 0;              // of the n, those that learnt little (RunData::poor): in the statistics, named
  int in_progress = 0;       // runs with status running
  MeanStd final_test_acc, best_test_acc, final_train_loss, final_test_loss;
  // With ReportData::on_validation: the best validation accuracy of each run and the test accuracy
  // of the epoch it chose, over the finished runs (NaN without validation).
  MeanStd chosen_val_acc, chosen_test_acc;
  EffectiveSettings effective;
  std::optional<double> target_acc;
  int target_reached = 0;    // finished runs that reached the target
  int target_at_points = 0;  // of those, the runs measured at evaluation points (RunData::reaching)
  double target_epochs = 0;  // mean over those runs (NaN when none)
  double target_wall_s = 0;
  // Means over those runs of the optimizer steps, the samples (step x global batch) and the device-
  // seconds (wall seconds x replicas) to where each reached the target (NaN when none).
  double target_steps = 0, target_samples = 0, target_device_s = 0;
  double target_wall_s_min = 0, target_wall_s_max = 0;  // over those runs (NaN when none)
  // report.target_loss: finished runs whose step records reach it, and the mean over them of the
  // steps and samples to the first record at or below it (NaN when none).
  std::optional<double> target_loss;
  int target_loss_reached = 0;
  double target_loss_steps = 0, target_loss_samples = 0;
  double images_per_s = 0;                            // mean over finished runs of their mean throughput
  double images_per_s_min = 0, images_per_s_max = 0;  // the lowest and highest of those runs
  // The host's CPU wait and steal while those runs trained (runtime/host_load.h): the mean of the
  // runs' means, in percent; NaN where no run measured it.
  double host_cpu_wait_pct = 0, host_steal_pct = 0;
  int replicas = 1;
  int64_t per_replica_batch = 0;
  std::optional<double> scaling_efficiency;  // thr(N) / (N * thr(1)) against `baseline`
  std::optional<size_t> baseline;            // the 1-replica group of the same per-replica batch
  std::vector<double> final_accs;            // final test accuracy of each finished run
  // The comparisons' metric of each finished run by its seed: final test accuracy in points, or
  // the mean of the last ReportData::final_epochs epochs (a repeated seed keeps the mean of its runs).
  SeedValues metric_by_seed;
  MeanStd metric;  // over metric_by_seed (points)
  // Test set size (spec dataset.test_limit when > 0, else 10000 for fashion-mnist, mnist, cifar10
  // and cifar100; unknown for idx) and the sampling error sqrt(p (1 - p) / n_test) it puts on the
  // group's mean final accuracy p, in points (NaN when unknown).
  std::optional<int64_t> test_samples;
  double test_sampling_error_pts = 0;
  int64_t global_batch = 0;
  // Gradient noise scale B_simple (mean over the finished runs that logged one) at the first epoch
  // that has it and at the final epoch (NaN when the final epoch has none, e.g. local SGD after
  // its all-reduce phase, or when no run logged one).
  // Guarded: runs that diverged or ended near chance (rundir::ended_near_chance) are
  // left out, and so are epochs whose lr is below 10% of the run's peak lr ("last" is the last
  // epoch that is not).
  double noise_scale_first = 0, noise_scale_last = 0;
  int noise_scale_runs_left_out = 0;  // runs with noise-scale records left out as diverged or near chance
  // Non-empty when the last epoch's |G|^2 estimate is not positive or near zero (B_simple above
  // 100 x the global batch): why the noise scale is "not reliable here" instead of a number.
  std::string noise_scale_unreliable;
  double comm_bytes = 0;  // total over the epochs, mean over finished runs (NaN when not logged)
  // Measured beside the noise scale's prediction: 1 - steps(2B) / steps(B) to report.target_loss
  // (target_loss_steps), against the group at twice this global batch that differs from this one
  // only in how the batch is made (batch.*, replicas.count, replicas.threads); nullopt without one.
  std::optional<double> measured_steps_saved;
};

// "2 of 3 runs (1 collapsed)": of a group's ended runs (ok, collapsed, diverged), how many are
// in its statistics, and why the others are not.
std::string ok_of_ended(const GroupStats& g);
// "2 of 3 runs collapsed" (or "diverged", or "collapsed or diverged" for both): of a group's ended
// runs, how many failed.
std::string failed_runs(const GroupStats& g);

// A pair of groups that differ in exactly one setting, compared on the metric (GroupStats::metric_by_seed)
// with compare_by_seed: paired over shared seeds, else Welch; Holm-adjusted over every comparison
// of the report; equivalence margin ReportData::equivalence_pts; the test set's sampling error as
// the resolution floor when both groups know it.
struct GroupComparison {
  size_t a = 0, b = 0;                 // group indices
  std::string key;                     // the Setting's name (a planned contrast: all differing keys, ", "-joined)
  std::string value_a, value_b;        // setting_text of each group
  std::string planned;                 // a report.contrasts entry's name; empty for a one-setting comparison
  std::vector<std::string> followers;  // "replicas.threads: 2 vs 1": derived settings that changed with `key`
  Comparison stats;                    // B - A
  std::string sentence;                // describe(stats, label of a, label of b)
  // Identical runs: A and B share at least one seed with a finished run, and for every such
  // seed their epoch records agree bit for bit (global batch, lr, step, losses, accuracies; the machine's
  // fields aside), e.g. a scale rule at batch == schedule.base_batch, whose factor is 1. Such a
  // comparison gets no verdict and stays out of Holm's family (stats.m = 0): it tests nothing.
  bool identical = false;
  size_t identical_seeds = 0;  // the shared seeds behind `identical`
  // When either group has collapsed or diverged runs: Fisher's exact two-sided p that both groups'
  // runs ended badly equally often (nullopt when neither has any). Not in Holm's family.
  std::optional<double> bad_runs_p;
};

// A swept setting: the differing keys that tell the groups apart alike (every value of one comes
// with one value of each other, and the reverse), as a sweep_zip's keys or the two channel counts
// of one model.layers change do. Its data cannot separate them, so the report compares them as one
// choice. Followers (ReportData::follower_keys) are in no setting.
struct Setting {
  std::string name;               // the keys joined with " + ": "optimizer.lr + optimizer.name"
  std::vector<std::string> keys;  // sorted dotted keys
};

// The text of a flattened spec value in labels and tables: a string without quotes, "(unset)"
// for a key the group does not set, else its JSON.
std::string value_text(const nlohmann::json& v);

// A group's value of the setting: its key's value, or for several keys the array of their values.
nlohmann::json setting_value(const GroupStats& g, const Setting& s);

// "8, 16": value_text of each key's value, ", "-joined.
std::string setting_text(const GroupStats& g, const Setting& s);

// The target the report chooses when none is set (docs/report.md): what the best group reliably
// reaches, less the equivalence margin. The best group is the one whose mean curve (per epoch, the
// mean selection_acc over its finished runs) peaks highest among the groups with at least
// kChosenTargetRuns finished runs, none of which collapsed or diverged; what it reliably reaches is
// the lowest of its runs' peaks; less ReportData::equivalence_pts and rounded down to 0.1 points,
// that is the target: the accuracy of a configuration as good as the best one within the margin.
// Without such a group there is no target, and `refusal` says why and which to give.
constexpr int kChosenTargetRuns = 2;
struct ChosenTarget {
  std::optional<double> acc;  // the target, a fraction
  std::string set_by;         // the best group's label ("" when no group has a finished run)
  double reliable = 0;        // the lowest of its runs' peaks, a fraction
  int runs = 0;               // its runs that did not fail
  double best_peak = 0;       // the highest mean curve's peak of any group (with refusal: to suggest)
  std::string refusal;        // why no target was chosen; empty with one
};

struct ReportData {
  std::vector<RunData> runs;
  std::vector<GroupStats> groups;
  std::vector<GroupComparison> comparisons;
  std::vector<std::string> differing_keys;  // dotted keys that differ across groups, sorted
  // Differing keys left out of the labels because they only follow another differing key:
  // "replicas.threads follows replicas.count".
  std::vector<std::string> follower_notes;
  std::vector<std::string> follower_keys;  // the keys of follower_notes
  std::vector<Setting> settings;           // the differing keys but followers, as settings, by first key
  double equivalence_pts = 0.5;            // ReportOptions / report.equivalence_pts
  int final_epochs = 1;                    // ReportOptions / report.final_epochs
  std::optional<double> target_loss;       // ReportOptions / report.target_loss
  // The target accuracy (fraction): ReportOptions / report.target_acc, else chosen_target's.
  std::optional<double> target_acc;
  bool target_chosen = false;  // target_acc is the report's own choice
  ChosenTarget chosen;         // with no target set: how the report chose one, or why it did not
  // Every run with records has val_acc in each record: selection reads validation accuracy.
  bool on_validation = false;
  std::vector<std::string> warnings;  // "file:line: ..." for skipped records etc.
  std::string title;                  // the experiment name(s)
};

// One change of one swept setting for the report's summary: a comparison (index into
// ReportData::comparisons) between two neighbouring values of the setting (no group with the same
// other settings has a value in between), `at` naming the other settings' values.
struct SettingChange {
  size_t comparison = 0;
  std::string at;  // "schedule.scale_rule=linear", or "" when no other setting differs
};
// The changes, by setting in ReportData::settings order, then by the groups' order; then the
// planned contrasts (report.contrasts), `at` empty.
std::vector<SettingChange> summary_changes(const ReportData& data);

// McCandlish et al. (2018), eqs. 2.11-2.12: steps S and samples E = S B to reach one target at
// global batch B follow S = S_min (1 + B_crit / B) and E = E_min (1 + B / B_crit), E_min =
// S_min B_crit. Fitted by least squares of S on 1/B (S = S_min + S_min B_crit / B).
struct BatchTradeoffFit {
  double s_min = 0, e_min = 0, b_crit = 0;
  double steps(double batch) const { return s_min * (1 + b_crit / batch); }
  double samples(double batch) const { return e_min * (1 + batch / b_crit); }
};
// nullopt with fewer than 2 distinct batches, when tradeoff_refusal says why the model does not
// apply, or when the fit is not physical (S_min <= 0 or B_crit <= 0: the steps do not fall as the
// batch grows).
std::optional<BatchTradeoffFit> fit_batch_tradeoff(const std::vector<double>& batch, const std::vector<double>& steps);
// Why the model cannot describe these measurements, or "" when it may: in it the samples to the
// target, E = S B, grow with B (each sample of a larger batch helps less). Where E falls from one
// batch to the next, the smaller batch was held back by something else (an lr tuned for another
// batch, most often), and a fitted B_crit would measure that: "samples to target fall from
// 663,552 at batch 32 to 520,192 at batch 256".
std::string tradeoff_refusal(const std::vector<double>& batch, const std::vector<double>& steps);

// B_crit at one training-loss target with its uncertainty over seeds (issue 31 item 3): each
// seed's own fit, the fit on the mean steps over seeds, and a percentile interval from resampling
// the seeds. `steps_by_seed`: seed -> global batch -> steps to the target (a seed that did not
// reach it at a batch is absent there).
struct CriticalBatchEstimate {
  double target = 0;                    // the training loss
  int seeds = 0;                        // seeds with steps at 2+ batches
  std::optional<BatchTradeoffFit> fit;  // on the mean steps per batch over the seeds
  std::string refusal;                  // why `fit` is empty (tradeoff_refusal, or too few batches)
  std::vector<double> per_seed;         // each seed's own B_crit, seed order (refused seeds left out)
  int seeds_refused = 0;                // seeds whose own measurements the model refuses
  // 2.5 and 97.5 percentiles of B_crit over the resamples: a bootstrap percentile interval, NaN when
  // there is none or it would not be one (interval_refusal says why).
  double low = 0, high = 0;
  int resamples = 0, resamples_refused = 0;
  std::string interval_refusal;  // "3 seeds: too few to resample (5 needed)", "..."; empty with an interval
};
// The fewest seeds whose resampling gives an interval worth the name: with 3 there are 10 distinct
// resamples, each holding a third of the seeds at least once.
constexpr int kCriticalBatchIntervalSeeds = 5;
// The largest share of resamples the model may refuse before the percentiles of the others stop
// being an interval of the estimate (they describe the resamples it accepts).
constexpr double kCriticalBatchRefusedShare = 0.05;
// kCriticalBatchResamples resamples of the seeds with replacement (std::mt19937_64 seeded with 1,
// an index drawn as draw() % seeds, so every toolchain draws the same), each fitted on its mean
// steps per batch; a resample the model refuses counts in resamples_refused and adds no B_crit.
constexpr int kCriticalBatchResamples = 2000;
CriticalBatchEstimate estimate_critical_batch(const std::map<int64_t, std::map<double, double>>& steps_by_seed,
                                              double target);
// The training-loss targets the report fits B_crit at: report.target_loss T, and the easier 4/3 T
// and 5/3 T (where B_crit moves with the target, one target is no measurement of it).
std::vector<double> critical_batch_targets(double target_loss);
// For each line of groups over the global batch (the other swept settings fixed) and each target:
// the estimate from the finished runs' step records. Empty without report.target_loss.
std::vector<std::pair<std::string, CriticalBatchEstimate>> critical_batch_estimates(const ReportData& data);

// What more replicas buy at this global batch, given the noise scale (McCandlish et al. 2018:
// steps to a given loss ~ S_min (1 + B_noise / B), samples ~ E_min (1 + B / B_noise)).
struct NoiseScaleVerdict {
  double ratio = 0;          // B / B_noise
  double steps_saved = 0;    // predicted fraction of the steps that doubling the global batch saves (ideal 0.5)
  double samples_added = 0;  // fraction more samples (epochs) that doubling it costs
  std::string sentence;      // e.g. "global batch 256 is 0.31 x B_noise (~830): far below ..."
};
// The verdict for a group: "not reliable here (<reason>)" when GroupStats::noise_scale_unreliable
// says why, else noise_scale_verdict(global batch, noise_scale_last).
std::string noise_scale_sentence(const GroupStats& g);
NoiseScaleVerdict noise_scale_verdict(double global_batch, double b_noise);

// The target the report chooses when none is set: ChosenTarget above.
ChosenTarget chosen_target(const ReportData& data);

// Who to pick at the target accuracy: the group fastest to it on mean wall seconds, and the group
// with the fewest device-seconds (wall x replicas) among those within kCheapestWithin of that
// time. `uncertain` names the groups that reached the target within the spread of the fastest one's
// runs (the rule of "first to reach": a's slowest run before b's fastest). Groups of identical
// runs (GroupComparison::identical, joined transitively) take part once, as the fastest of them:
// their times differ by the host's load alone. `identical` names those of the fastest's. A group
// with runs that collapsed or diverged is never picked, however fast its other runs were:
// `left_out` names those that reached the target.
constexpr double kCheapestWithin = 0.10;
struct Recommendation {
  const GroupStats* fastest = nullptr;  // nullptr when no group reached the target
  const GroupStats* cheapest = nullptr;
  std::vector<const GroupStats*> uncertain;
  std::vector<const GroupStats*> identical;  // groups whose runs are identical to the fastest's
  std::vector<const GroupStats*> left_out;   // reached the target, but some of their runs failed
};
Recommendation recommend(const ReportData& data);

struct ReportSummary {
  size_t runs = 0, groups = 0;
  std::vector<std::string> warnings;         // also printed to stderr
  std::vector<std::filesystem::path> files;  // every file written
  ReportData data;
};

// Reads every run below options.inputs (rundir::find_run_dirs, rundir::read_run: its notes of
// skipped records become warnings), groups them and computes the statistics.
ReportData analyze(const ReportOptions& options);

// analyze + writes the files listed above. Warnings go to stderr as "warning: ...".
ReportSummary write_report(const ReportOptions& options);

// The pieces, for tests and other front ends.
struct NamedChart {
  std::string file;   // "test_acc.svg"
  std::string title;  // "Test accuracy vs epoch"
  std::string svg;
  std::string caption;  // what is drawn, under the chart ("" for none)
};
// Every chart of one report, computed once per write_report and shared by report.html, report.md
// and the SVG files.
struct ReportCharts {
  std::vector<NamedChart> epochs;  // render_charts
  std::vector<NamedChart> axis;    // axis_charts
};
ReportCharts report_charts(const ReportData& data);
std::string render_html(const ReportData& data, const ReportCharts& charts);
std::string render_markdown(const ReportData& data, const ReportCharts& charts);
// The same with the charts computed here.
std::string render_html(const ReportData& data);
std::string render_markdown(const ReportData& data);
std::string render_summary_csv(const ReportData& data);
std::string render_groups_csv(const ReportData& data);
std::string render_comparisons_csv(const ReportData& data);
std::vector<NamedChart> render_charts(const ReportData& data);
// The charts against the swept settings, those the groups allow: acc_vs_batch (the metric vs
// global batch on a log2 axis, 95% t interval bars over seeds, a line per other setting; groups
// at one global batch through different replica / per-replica splits pooled into one point) when the
// global batch varies; throughput_vs_replicas (images/s vs replicas with the ideal linear line
// from the fewest replicas) and, with a target that some group reached, target_time_vs_replicas,
// when the replica count varies; batch_tradeoff (steps vs samples to report.target_loss, or else
// to the target accuracy at epoch granularity, with the fit above and the measured B_simple) when
// the global batch varies and at least 2 batches reached the target; acc_heatmap (the metric over
// the grid, svg.h Heatmap) when exactly two settings are swept, both numeric with 2+ values.
std::vector<NamedChart> axis_charts(const ReportData& data);

}  // namespace ddplab::report
