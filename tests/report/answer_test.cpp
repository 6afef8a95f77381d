// The report answers by itself (issue 35 items 2, 4, 5; issue 33 item 5): the effective
// differences of each change, a target of its own, a recommendation, selection on validation,
// curves against steps and samples, and charts that read at a glance.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/report/report.h"
#include "ddplab/report/svg.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

using namespace ddplab::report;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_run;

namespace {

// The tick labels of an SVG axis: the <text> elements of its "ticks" group whose anchor is
// `anchor` ("middle": x axis, "end": y axis).
std::vector<std::string> ticks_of(const std::string& svg, const std::string& anchor) {
  const size_t start = svg.find("<g class=\"ticks\"");
  const std::string block = svg.substr(start, svg.find("</g>", start) - start);
  std::vector<std::string> out;
  const std::regex tick("text-anchor=\"" + anchor + "\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(block.begin(), block.end(), tick); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

// Legend text -> stroke colour of its swatch.
std::map<std::string, std::string> legend_colours(const std::string& svg) {
  std::map<std::string, std::string> out;
  const std::regex entry("<g class=\"legend\"><line [^>]*stroke=\"(#[0-9A-Fa-f]{6})\"[^>]*/><text [^>]*>([^<]*)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), entry); it != std::sregex_iterator(); ++it)
    out[(*it)[2].str()] = (*it)[1].str();
  return out;
}

// Replicas 1 and 2 at per-replica batch 64, seeds 1 and 2, each run changed by `patch`.
void write_two_arms(const TempDir& tmp, const std::function<void(FakeRun&)>& patch) {
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      patch(r);
      write_run(tmp.path() / "runs", r);
    }
}

}  // namespace

TEST(ReportSvg, AnIntegerAxisHasOnlyWholeTicks) {
  EXPECT_EQ(nice_ticks(1, 2, 8, true), (std::vector<double>{1, 2}));
  EXPECT_NEAR(nice_ticks(1, 2, 8)[1] - nice_ticks(1, 2, 8)[0], 0.2, 1e-12) << "without it, fifths";
  LineChart chart = line_chart("epochs", "t", "epoch", "y");
  chart.integer_x = true;
  ChartSeries s;
  s.x = {1, 2, 3};
  s.y = {1, 2, 3};
  chart.series.push_back(s);
  for (const auto& t : ticks_of(render_svg(chart), "middle")) EXPECT_EQ(t.find('.'), std::string::npos) << t;
}

TEST(ReportSvg, AnErrorBarPastTheAxisEndsAtItsEdgeInAnArrow) {
  LineChart chart = line_chart("bars", "t", "x", "accuracy (%)");
  chart.y_floor = 0, chart.y_ceil = 100;
  ChartSeries s;
  s.x = {1, 2};
  s.y = {80, 90};
  s.err_lo = {75, 60};
  s.err_hi = {85, 130};  // an interval of 2 seeds past 100%
  chart.series.push_back(s);
  const std::string svg = render_svg(chart);
  const auto y_ticks = ticks_of(svg, "end");
  EXPECT_EQ(y_ticks.back(), "100") << "the axis stops at 100%, not at the bar's 130";
  EXPECT_EQ(std::count_if(y_ticks.begin(), y_ticks.end(), [](const std::string& t) { return std::stod(t) > 100; }), 0);
  size_t clipped = 0;
  for (size_t at = svg.find("error-bar clipped"); at != std::string::npos; at = svg.find("error-bar clipped", at + 1))
    ++clipped;
  EXPECT_EQ(clipped, 1u) << svg;
  // The clipped bar runs to the plot's top edge (y = 40) and ends there in an arrow, not a cap.
  EXPECT_NE(svg.find("d=\"M740.00,400.00 L740.00,40.00 "), std::string::npos) << svg;
  EXPECT_NE(svg.find(" M736.00,46.00 L740.00,40.00 L744.00,46.00\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("M736.00,40.00 L744.00,40.00"), std::string::npos) << "no cap at the edge";
}

TEST(ReportSvg, PointsCarryTheirOwnColourAndLabel) {
  LineChart chart = line_chart("points", "t", "x", "y");
  ChartSeries s;
  s.colour = kNeutralColour;
  s.x = {1, 2};
  s.y = {1, 2};
  s.point_colour = {3, -1};
  s.point_label = {"B = 64", ""};
  chart.series.push_back(s);
  const std::string svg = render_svg(chart);
  EXPECT_NE(svg.find("fill=\"" + palette_colour(3) + "\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">B = 64</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("stroke=\"" + colour_of_index(kNeutralColour) + "\""), std::string::npos);
}

TEST(ReportCharts, EachGroupHasOneColourInEveryChart) {
  TempDir tmp;
  // Only the 2-replica group logs a noise scale: on noise_scale.svg it is the only series, and
  // must keep the colour it has on test_acc.svg.
  write_two_arms(tmp, [](FakeRun& r) {
    if (r.replicas == 2) r.noise_scale = {100, 120, 140}, r.grad_sq = {1, 1, 1};
  });
  const ReportOptions o = options_for(tmp);
  write_report(o);
  const auto acc = legend_colours(read_file(o.out_dir / "test_acc.svg"));
  const auto noise = legend_colours(read_file(o.out_dir / "noise_scale.svg"));
  ASSERT_EQ(acc.size(), 2u);
  ASSERT_EQ(noise.size(), 1u);
  EXPECT_EQ(noise.begin()->second, acc.at("replicas.count=2"));
  EXPECT_NE(acc.at("replicas.count=1"), acc.at("replicas.count=2"));
  for (const char* chart : {"test_acc_steps.svg", "test_acc_samples.svg", "test_acc_wall.svg", "lr.svg"})
    EXPECT_EQ(legend_colours(read_file(o.out_dir / chart)), acc) << chart;
  // The HTML's colour key says the same.
  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_NE(html.find("background:" + acc.at("replicas.count=2") + "\"></span>replicas.count=2"), std::string::npos);
}

TEST(ReportCharts, AccuracyIsInPercentAndEpochTicksAreWhole) {
  TempDir tmp;
  write_two_arms(tmp, [](FakeRun& r) { r.test_acc = {0.5, 0.7, 0.8, 0.82, 0.83}; });
  const ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string svg = read_file(o.out_dir / "test_acc.svg");
  EXPECT_NE(svg.find("test accuracy (%)"), std::string::npos);
  const auto y = ticks_of(svg, "end");
  EXPECT_GE(std::stod(y.back()), 83) << "83%, not 0.83";
  EXPECT_LE(std::stod(y.back()), 100);
  for (const auto& t : ticks_of(svg, "middle")) EXPECT_EQ(t.find('.'), std::string::npos) << "epoch " << t;
}

TEST(ReportCharts, MarkdownHasNoHtmlEntities) {
  TempDir tmp;
  write_two_arms(tmp, [](FakeRun& r) { r.test_acc = {0.5, 0.7, 0.8 + 0.03 * r.seed * (r.replicas - 1)}; });
  const ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("can't tell"), std::string::npos) << md;
  EXPECT_EQ(md.find("&#39;"), std::string::npos);
  EXPECT_EQ(md.find("&amp;"), std::string::npos);
}

TEST(ReportAnswer, EachChangeStatesItsEffectiveDifferencesFromTheRecords) {
  TempDir tmp;
  // 12,000 training samples: 188 steps of 64, 94 of 128; the lr scaled linearly with the replicas.
  write_two_arms(tmp, [](FakeRun& r) {
    r.train_samples = 12000;
    r.lr = 0.01 * r.replicas;
  });
  ReportData d = analyze(options_for(tmp));
  const GroupStats &one = group_labelled(d, "replicas.count=1"), &two = group_labelled(d, "replicas.count=2");
  EXPECT_EQ(two.effective.global_batch, 128);
  EXPECT_NEAR(two.effective.steps_per_epoch, 94, 1e-9);
  EXPECT_EQ(effective_change(one.effective, two.effective),
            "global batch 64 \xE2\x86\x92 128, steps/epoch 188 \xE2\x86\x92 94, lr 0.01 \xE2\x86\x92 0.02");
  EXPECT_NE(render_markdown(d).find("| global batch 64 \xE2\x86\x92 128, steps/epoch 188 \xE2\x86\x92 94,"),
            std::string::npos);

  TempDir same_lr;
  write_two_arms(same_lr, [](FakeRun&) {});
  d = analyze(options_for(same_lr));
  EXPECT_EQ(effective_change(d.groups[0].effective, d.groups[1].effective),
            "global batch 64 \xE2\x86\x92 128, steps/epoch unchanged, lr unchanged");
}

// Runs without the schedule in their manifest (written before it was): a warmup then a decay to
// near 0 is compared from the records, at the end of epoch 1 and at the highest recorded lr (what
// the scaling rules scale), not at the last epoch; a group whose runs wrote no record gives dashes.
TEST(ReportAnswer, WithoutTheScheduleAnLrThatMovesIsComparedFromTheRecords) {
  TempDir tmp;
  write_two_arms(tmp, [](FakeRun& r) {
    const double k = r.replicas;
    r.lr_by_epoch = {0.05 * k, 0.1 * k, 1e-7 * k};
  });
  const ReportData d = analyze(options_for(tmp));
  const GroupStats &one = group_labelled(d, "replicas.count=1"), &two = group_labelled(d, "replicas.count=2");
  EXPECT_DOUBLE_EQ(two.effective.lr_peak, 0.2);
  EXPECT_FALSE(two.effective.scheduled());
  EXPECT_EQ(effective_change(one.effective, two.effective),
            "global batch 64 \xE2\x86\x92 128, steps/epoch unchanged, lr 0.05 \xE2\x86\x92 0.1 at the end of epoch "
            "1, highest recorded 0.1 \xE2\x86\x92 0.2");
  const EffectiveSettings none{0, std::nan(""), std::nan(""), std::nan("")};
  EXPECT_EQ(effective_change(one.effective, none),
            "global batch 64 \xE2\x86\x92 \xE2\x80\x94, steps/epoch 100 \xE2\x86\x92 \xE2\x80\x94, lr 0.05 "
            "\xE2\x86\x92 \xE2\x80\x94 at the end of epoch 1, highest recorded 0.1 \xE2\x86\x92 \xE2\x80\x94");
}

// With the schedule in the manifests (train/lr_schedule.h's manifest_entry), the lr is the spec's,
// the scaled and the scheduled peak, whatever the end-of-epoch records sampled.
TEST(ReportAnswer, TheLrIsShownAsScheduled) {
  TempDir tmp;
  write_two_arms(tmp, [](FakeRun& r) {
    const double k = r.replicas;
    r.lr_by_epoch = {0.0378 * k, 0.03 * k, 1e-7 * k};
    r.manifest_patch = {
        {"lr_schedule",
         {{"spec", 0.05}, {"scale", k}, {"scaled", 0.05 * k}, {"peak", 0.0467 * k}, {"peak_epoch", 0.5}}}};
  });
  const ReportData d = analyze(options_for(tmp));
  const GroupStats &one = group_labelled(d, "replicas.count=1"), &two = group_labelled(d, "replicas.count=2");
  EXPECT_EQ(effective_change(one.effective, two.effective),
            "global batch 64 \xE2\x86\x92 128, steps/epoch unchanged, lr 0.05 (unchanged) in the spec, scaled 0.05 "
            "\xE2\x86\x92 0.1, peak 0.0467 \xE2\x86\x92 0.0934 as scheduled");
  EXPECT_EQ(effective_change(one.effective, one.effective),
            "global batch unchanged, steps/epoch unchanged, lr unchanged");
}

TEST(ReportAnswer, WithoutATargetTheReportTakesWhatTheBestGroupReliablyReachesLessTheMargin) {
  TempDir tmp;
  // Peaks: 1 replica 80 and 82 (seeds 1, 2), 2 replicas 75 and 76.
  write_two_arms(
      tmp, [](FakeRun& r) { r.test_acc = {0.5, 0.7, r.replicas == 1 ? 0.78 + 0.02 * r.seed : 0.74 + 0.01 * r.seed}; });
  const ReportData d = analyze(options_for(tmp));
  ASSERT_TRUE(d.target_acc.has_value());
  EXPECT_TRUE(d.target_chosen);
  EXPECT_EQ(d.chosen.set_by, "replicas.count=1") << "its mean curve peaked highest";
  EXPECT_NEAR(d.chosen.reliable, 0.80, 1e-12) << "the lower of its two runs' peaks";
  EXPECT_NEAR(*d.target_acc, 0.795, 1e-12) << "80% less the 0.5-point equivalence margin";
  const GroupStats &one = group_labelled(d, "replicas.count=1"), &two = group_labelled(d, "replicas.count=2");
  EXPECT_EQ(one.target_reached, 2);
  EXPECT_NEAR(one.target_device_s, 36, 1e-9) << "wall 36 s at epoch 3, on 1 replica";
  EXPECT_EQ(two.target_reached, 0) << "76% is not as good as the best within the margin";
  const std::string html = render_html(d);
  EXPECT_NE(html.find("Time to 79.50% test accuracy"), std::string::npos) << html;
  EXPECT_NE(html.find("the report chose the target from what the best group reliably reaches"), std::string::npos);

  ReportOptions set = options_for(tmp);
  set.target_acc = 0.7;
  const ReportData given = analyze(set);
  EXPECT_FALSE(given.target_chosen);
  EXPECT_NEAR(*given.target_acc, 0.7, 0);
}

TEST(ReportAnswer, ABestGroupWithAFailedRunSetsNoTarget) {
  TempDir tmp;
  // 2 replicas peak highest (90, 91) but its seed 2 collapses: 1 replica (80, 82) sets the target.
  write_two_arms(tmp, [](FakeRun& r) {
    r.test_acc = {0.5, 0.7, 0.78 + 0.02 * r.seed};
    if (r.replicas == 2)
      r.test_acc = r.seed == 2 ? std::vector<double>{0.1, 0.1, 0.1} : std::vector<double>{0.5, 0.8, 0.9};
  });
  const ReportData d = analyze(options_for(tmp));
  EXPECT_EQ(d.chosen.set_by, "replicas.count=1");
  ASSERT_TRUE(d.target_acc.has_value());
  EXPECT_NEAR(*d.target_acc, 0.795, 1e-12);
}

TEST(ReportAnswer, WithOneRunPerGroupTheReportChoosesNoTargetAndSaysWhichToGive) {
  TempDir tmp;
  for (int replicas : {1, 2}) {
    FakeRun r;
    r.replicas = replicas;
    r.test_acc = {0.5, 0.7, replicas == 1 ? 0.8 : 0.75};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  EXPECT_FALSE(d.target_acc.has_value());
  EXPECT_FALSE(d.target_chosen);
  const std::string md = render_markdown(d);
  EXPECT_NE(md.find("No time to target and no recommendation: no report.target_acc is set and the report chose none, "
                    "since no group has 2 finished runs"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("(replicas.count=1's mean curve peaked at 80.00%)"), std::string::npos) << md;
}

TEST(ReportAnswer, RecommendsTheFastestAndTheCheapestWithinTenPercentOfIt) {
  TempDir tmp;
  // To 70% (epoch 2): 1 replica at 23 and 24 s (device-s 23, 24), 2 replicas at 21 and 22 s (42, 44).
  write_two_arms(tmp, [](FakeRun& r) { r.wall_per_epoch = (r.replicas == 1 ? 11 : 10) + 0.5 * r.seed; });
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  const ReportData d = analyze(o);
  const Recommendation r = recommend(d);
  ASSERT_NE(r.fastest, nullptr);
  EXPECT_EQ(r.fastest->label, "replicas.count=2");
  ASSERT_NE(r.cheapest, nullptr);
  EXPECT_EQ(r.cheapest->label, "replicas.count=1") << "23.5 s is within 10% of 21.5 s, at half the device-seconds";
  EXPECT_TRUE(r.uncertain.empty()) << "1 replica's fastest run (23 s) is after 2 replicas' slowest (22 s)";
  const std::string html = render_html(d);
  EXPECT_NE(html.find("Recommendation at 70.00% test accuracy: replicas.count=2 is fastest (21.5 s, 43.0 "
                      "device-s); within 10% of its time, replicas.count=1 is cheapest (23.5 s, 23.5 device-s"),
            std::string::npos)
      << html;

  // One replica 5% slower but overlapping in its runs: the pick is flagged.
  TempDir close;
  write_two_arms(close, [](FakeRun& r) { r.wall_per_epoch = r.replicas == 1 ? 10.5 + r.seed : 10 + r.seed; });
  o = options_for(close);
  o.target_acc = 0.7;
  const ReportData dc = analyze(o);
  EXPECT_EQ(recommend(dc).uncertain.size(), 1u);
  const std::string md = render_markdown(dc);
  EXPECT_NE(md.find("Uncertain: 1 other group reached it within the spread of the fastest one's runs"),
            std::string::npos)
      << md;

  // Beyond 10% of the fastest the cheaper group is not named.
  TempDir far;
  write_two_arms(far, [](FakeRun& r) { r.wall_per_epoch = r.replicas == 1 ? 20 : 10; });
  o = options_for(far);
  o.target_acc = 0.7;
  const ReportData df = analyze(o);
  EXPECT_EQ(recommend(df).cheapest, recommend(df).fastest);
}

TEST(ReportAnswer, SelectionReadsValidationWhenEveryRunHasIt) {
  TempDir tmp;
  // Validation peaks at epoch 2; test accuracy goes on rising to epoch 3.
  write_two_arms(tmp, [](FakeRun& r) {
    r.test_acc = {0.5, 0.7, 0.8};
    r.val_acc = {0.55, 0.75 + 0.01 * r.replicas, 0.74};
  });
  ReportData d = analyze(options_for(tmp));
  ASSERT_TRUE(d.on_validation);
  const GroupStats& two = group_labelled(d, "replicas.count=2");
  EXPECT_NEAR(two.chosen_val_acc.mean, 0.77, 1e-12);
  EXPECT_NEAR(two.chosen_test_acc.mean, 0.7, 1e-12) << "the test accuracy of the epoch validation chose";
  EXPECT_NEAR(*d.target_acc, 0.765, 1e-12)
      << "chosen on validation curves (2 replicas reach 77% in every run; less the 0.5-point margin)";
  EXPECT_NEAR(two.target_epochs, 2, 1e-12) << "time to target reads validation accuracy";
  std::string html = render_html(d);
  EXPECT_NE(html.find("chosen on the validation set"), std::string::npos);
  EXPECT_EQ(html.find("chosen on the test set"), std::string::npos);
  EXPECT_NE(html.find("<th>test acc at that epoch*</th>"), std::string::npos);
  EXPECT_NE(html.find("Time to 76.50% validation accuracy"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-val_acc\""), std::string::npos);

  // One run without a split: everything as before, on the test set.
  FakeRun plain;
  plain.seed = 3;
  write_run(tmp.path() / "runs", plain);
  d = analyze(options_for(tmp));
  EXPECT_FALSE(d.on_validation);
  html = render_html(d);
  EXPECT_NE(html.find("best over epochs: optimistic, chosen on the test set"), std::string::npos);
  EXPECT_EQ(html.find("id=\"chart-val_acc\""), std::string::npos);
}

TEST(ReportCharts, CurvesAgainstStepsAndSamplesSeen) {
  TempDir tmp;
  write_two_arms(tmp, [](FakeRun& r) { r.train_samples = 6400; });  // 100 and 50 steps per epoch
  const ReportOptions o = options_for(tmp);
  write_report(o);
  // 3 epochs: both arms end at 19.2 thousand samples; in steps, 300 and 150.
  const auto samples = ticks_of(read_file(o.out_dir / "test_acc_samples.svg"), "middle");
  EXPECT_GE(std::stod(samples.back()), 19.2);
  EXPECT_LT(std::stod(samples.back()), 25);
  const auto steps = ticks_of(read_file(o.out_dir / "test_acc_steps.svg"), "middle");
  EXPECT_GE(std::stod(steps.back()), 300);
  EXPECT_LT(std::stod(steps.back()), 400);
  const std::string html = read_file(o.out_dir / "report.html");
  for (const char* id : {"test_acc_samples", "test_acc_steps", "test_acc_wall", "test_loss_samples"})
    EXPECT_NE(html.find(std::string("id=\"chart-") + id + "\""), std::string::npos) << id;
}

// The captions are written from what was drawn: a pooled point, a fit and a B_simple marker are
// named only when the chart has them.
TEST(ReportCharts, CaptionsSayWhatIsDrawn) {
  TempDir tmp;
  // Replicas {1, 2} x per-replica batch {64, 128}: global batch 128 is reached two ways (pooled).
  // 12,800 samples: 200, 100 and 50 steps per epoch, so 70% (epoch 2) takes 25,600 samples at
  // every batch, which the trade-off model refuses (no fit).
  for (int per_replica : {64, 128})
    for (int seed = 1; seed <= 2; ++seed)
      for (int replicas : {1, 2}) {
        FakeRun r;
        r.seed = seed;
        r.replicas = replicas;
        r.per_replica = per_replica;
        r.train_samples = 12800;
        r.run_id = "r" + std::to_string(replicas) + "b" + std::to_string(per_replica) + "s" + std::to_string(seed);
        write_run(tmp.path() / "runs", r);
      }
  ReportOptions o = options_for(tmp);
  o.target_acc = 0.7;
  std::map<std::string, std::string> captions;
  for (const auto& c : axis_charts(analyze(o))) captions[c.file] = c.caption;
  ASSERT_EQ(captions.count("acc_vs_batch.svg"), 1u);
  EXPECT_NE(captions["acc_vs_batch.svg"].find("pooled"), std::string::npos) << captions["acc_vs_batch.svg"];
  ASSERT_EQ(captions.count("batch_tradeoff.svg"), 1u);
  EXPECT_NE(captions["batch_tradeoff.svg"].find("no fit"), std::string::npos) << captions["batch_tradeoff.svg"];
  EXPECT_EQ(captions["batch_tradeoff.svg"].find("B_crit"), std::string::npos) << "no fit is drawn";
  EXPECT_EQ(captions["batch_tradeoff.svg"].find("B_simple"), std::string::npos) << "no noise scale was logged";

  TempDir replicas_only;
  write_two_arms(replicas_only, [](FakeRun&) {});
  for (const auto& c : axis_charts(analyze(options_for(replicas_only))))
    EXPECT_EQ(c.caption.find("pooled"), std::string::npos) << c.file << ": one group per global batch";
}

// Past the palette's 8 colours a group's colour repeats an earlier one's: its lines are dashed in
// every chart and its swatch in the key is dashed too.
TEST(ReportCharts, AGroupPastThePaletteIsDashedInTheChartsAndTheKey) {
  TempDir tmp;
  for (int replicas = 1; replicas <= 9; ++replicas) {
    FakeRun r;
    r.replicas = replicas;
    write_run(tmp.path() / "runs", r);
  }
  const ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_NE(html.find("repeating-linear-gradient(90deg," + palette_colour(0) +
                      " 0 6px,#ffffff 6px 9px)\"></span>"
                      "replicas.count=9"),
            std::string::npos)
      << html.substr(0, 3000);
  EXPECT_NE(html.find("background:" + palette_colour(7) + "\"></span>replicas.count=8"), std::string::npos);
  const std::string svg = read_file(o.out_dir / "test_acc.svg");
  EXPECT_NE(svg.find("stroke=\"" + palette_colour(8) + "\" stroke-width=\"3\" stroke-dasharray=\"6,3\"/><text"),
            std::string::npos)
      << "the ninth group's legend line is dashed";
}
