// report/svg.h: axes, ticks and legends of the charts.
#include "ddplab/report/svg.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/report/svg.h"
#include "test_util.h"

using namespace ddplab;
using namespace ddplab::report;

TEST(ReportSvg, NiceTicksCoverRange) {
  const auto t = nice_ticks(0.13, 0.87, 6);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.13);
  EXPECT_GE(t.back(), 0.87);
  EXPECT_NEAR(t[1] - t[0], 0.2, 1e-12);  // 0.74 / 6 rounds up to a step of 2 x 10^-1
  EXPECT_FALSE(nice_ticks(5, 5).empty());
}

TEST(ReportSvg, LogTicksCoverRangeAtOneTwoFive) {
  EXPECT_EQ(log_ticks(30, 900), (std::vector<double>{20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(log_ticks(100, 100), (std::vector<double>{100, 200}));
  // More than 3 decades: powers of ten only.
  EXPECT_EQ(log_ticks(3, 40000), (std::vector<double>{1, 10, 100, 1000, 10000, 100000}));
  EXPECT_TRUE(log_ticks(0, 10).empty());
}

TEST(ReportSvg, LogAxisAndReferenceLine) {
  LineChart chart;
  chart.id = "ns";
  chart.log_y = true;
  ChartSeries s;
  s.label = "g";
  s.x = {1, 2, 3};
  s.y = {100, -5, 1000};  // a non-positive value cannot be drawn on a log axis
  s.reference_y = 10;
  chart.series.push_back(s);
  const std::string svg = render_svg(chart);
  EXPECT_NE(svg.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(svg.find(">10</text>"), std::string::npos) << "the reference widens the axis down to 10";
  EXPECT_NE(svg.find(">1000</text>"), std::string::npos);
  // Two drawn points (the negative one is skipped): one L segment.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("class=\"line\" d=\"([^\"]*)\"")));
  const std::string path = m[1].str();
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 1) << path;
}

TEST(ReportSvg, ARangeAtRoundingLevelIsOneValue) {
  // The mean of three runs' lr 0.1 is 0.10000000000000002: the axis must still have distinct ticks.
  const auto ticks = nice_ticks(0.1, (0.1 + 0.1 + 0.1) / 3);
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_LT(ticks.front(), 0.1);
  EXPECT_GT(ticks.back(), 0.1);
  LineChart chart;
  chart.id = "flat";
  ChartSeries s;
  s.label = "flat";
  s.x = {1, 2, 3};
  s.y = {0.1, (0.1 + 0.1 + 0.1) / 3, 0.1};
  chart.series.push_back(s);
  EXPECT_NO_THROW(render_svg(chart));
}

TEST(ReportSvg, SixteenGroupLegendStaysInsideTheViewBox) {
  LineChart chart;
  chart.id = "many";
  chart.title = "many groups";
  for (int k = 0; k < 16; ++k) {
    ChartSeries s;
    s.label = fmt::format(
        "replicas.count={}, schedule.scale_rule=linear, optimizer.lr=0.{}5, batch.per_replica=256, "
        "replicas.sync.local_sgd.period=16, replicas.sync.local_sgd.start_epoch=1",
        k, k);
    s.x = {1, 2};
    s.y = {0.5, 0.6};
    chart.series.push_back(s);
  }
  const std::string svg = render_svg(chart);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("viewBox=\"0 0 ([0-9.]+) ([0-9.]+)\"")));
  const double width = std::stod(m[1].str()), height = std::stod(m[2].str());
  // Every legend line: its baseline inside the height, and at 7.5 px per character (generous for
  // 12 px sans-serif) its end inside the width.
  const std::regex line(
      "<text x=\"([0-9.]+)\" y=\"([0-9.]+)\">([^<]*)|<tspan x=\"([0-9.]+)\" dy=\"([0-9.]+)\">([^<]*)");
  size_t lines = 0, groups = 0;
  double y = 0;
  std::string all;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& t = *it;
    const bool tspan = t[4].matched;
    const double x = std::stod(tspan ? t[4].str() : t[1].str());
    y = tspan ? y + std::stod(t[5].str()) : std::stod(t[2].str());
    const std::string text = tspan ? t[6].str() : t[3].str();
    if (text.find("replicas.") == std::string::npos && !tspan) continue;  // ticks, title, axis labels
    groups += tspan ? 0 : 1;
    ++lines;
    all += text + " ";
    EXPECT_LE(x + 7.5 * static_cast<double>(text.size()), width) << text;
    EXPECT_LE(y + 4, height) << text;
  }
  EXPECT_EQ(groups, 16u);
  EXPECT_GT(lines, 16u) << "long labels wrap";
  EXPECT_NE(all.find("replicas.count=15, schedule.scale_rule=linear"), std::string::npos) << "no text is lost";
  EXPECT_NE(all.find("start_epoch=1"), std::string::npos);
}
