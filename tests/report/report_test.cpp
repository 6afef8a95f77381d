// report/report.h end to end: reading run directories (skipped records become warnings), the
// files write_report writes, escaping, runs in progress, per-epoch charts, and the page in a browser.
#include "ddplab/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::count_of;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::run_command;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;
using ddplab::testing::write_run;

TEST(Report, TornLineIsSkippedWithFileAndLine) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t second = text.find('\n') + 1;
  text.insert(second, "{\"epoch\": 9, \"test_a\n");  // a torn line 2
  write_file(dir / "epochs.jsonl", text);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find((dir / "epochs.jsonl").string() + ":2:"), std::string::npos) << s.warnings[0];
  EXPECT_EQ(s.data.runs[0].epochs.size(), 3u);
  EXPECT_NE(read_file(tmp.path() / "report" / "report.html").find("epochs.jsonl:2:"), std::string::npos);
}

// A line that is JSON but not a record (rundir::EpochRecord::from_json) is skipped, naming the field.
TEST(Report, RecordWithAWrongTypedFieldIsSkippedNamingTheField) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t second = text.find('\n') + 1;
  const size_t third = text.find('\n', second) + 1;
  json rec = json::parse(text.substr(second, third - second));
  rec["lr"] = "fast";
  text.replace(second, third - second, rec.dump() + "\n");
  write_file(dir / "epochs.jsonl", text);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0],
            (dir / "epochs.jsonl").string() + ":2: skipped corrupt record (lr: expected a number, got \"fast\")");
  ASSERT_EQ(s.data.runs[0].epochs.size(), 2u);
  EXPECT_EQ(s.data.runs[0].epochs[1].epoch, 3);
}

// debug.audits "warn": the epochs whose audits failed are one warning naming the run, their
// count and the first message (in report.md's Warnings and on stderr).
TEST(Report, AuditWarningsOfARunBecomeOneWarning) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  std::string rewritten;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
    json rec = json::parse(text.substr(at, end - at));
    if (rec["epoch"] != 1)
      rec["audit_warnings"] = {
          fmt::format("update audit failed in epoch {}: parameter 'fc1.bias' did not change", rec["epoch"].get<int>())};
    rewritten += rec.dump() + "\n";
  }
  write_file(dir / "epochs.jsonl", rewritten);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0], dir.string() +
                               ": audits failed in 2 of its 3 epochs and it trained on (debug.audits warn); "
                               "the first: update audit failed in epoch 2: parameter 'fc1.bias' did not change");
  EXPECT_EQ(s.data.runs[0].epochs.size(), 3u) << "the records are kept";
  EXPECT_NE(read_file(tmp.path() / "report" / "report.md").find("audits failed in 2 of its 3 epochs"),
            std::string::npos);
}

// A diverged run's loss is NaN, which epochs.jsonl holds as null: the record is kept.
TEST(Report, NullLossReadsAsNoValue) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  std::string text = read_file(dir / "epochs.jsonl");
  const size_t last = text.rfind('\n', text.size() - 2) + 1;
  json rec = json::parse(text.substr(last));
  rec["train_loss"] = nullptr;
  text.replace(last, std::string::npos, rec.dump() + "\n");
  write_file(dir / "epochs.jsonl", text);
  const ReportData d = analyze(options_for(tmp));
  EXPECT_TRUE(d.warnings.empty());
  ASSERT_EQ(d.runs[0].epochs.size(), 3u);
  EXPECT_TRUE(std::isnan(d.runs[0].final_train_loss()));
  EXPECT_DOUBLE_EQ(d.runs[0].final_test_acc(), 0.8);
}

// A status ddplab does not write is shown as it is spelled, neither finished nor in progress.
TEST(Report, UnknownStatusIsShownNotRefused) {
  TempDir tmp;
  FakeRun r;
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.status = "paused-by-hand";
  write_run(tmp.path() / "runs", r);
  const ReportSummary s = write_report(options_for(tmp));
  ASSERT_EQ(s.data.runs.size(), 2u);
  EXPECT_FALSE(s.data.runs[1].status.has_value());
  EXPECT_EQ(s.data.runs[1].status_text(), "paused-by-hand");
  EXPECT_EQ(s.data.groups[0].n, 1);
  EXPECT_EQ(s.data.groups[0].in_progress, 0);
  EXPECT_NE(read_file(tmp.path() / "report" / "report.html").find("<td>paused-by-hand</td>"), std::string::npos);
  EXPECT_NE(read_file(tmp.path() / "report" / "summary.csv").find(",paused-by-hand,"), std::string::npos);
}

TEST(Report, DirectoryWithoutRunsIsAClearError) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "runs" / "empty");
  try {
    write_report(options_for(tmp));
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), (tmp.path() / "runs").string() + ": no runs found (no manifest.json below it)");
  }
}

TEST(Report, EscapesUserStringsInHtmlAndSvg) {
  TempDir tmp;
  FakeRun r;
  r.name = "<script>alert('x')</script>";
  r.run_id = "seed=1";
  r.scale_rule = "a&\"b\"";
  write_run(tmp.path() / "runs", r);
  r.run_id = "seed=2";
  r.scale_rule = "<b>";
  write_run(tmp.path() / "runs", r);
  write_report(options_for(tmp));
  const std::string html = read_file(tmp.path() / "report" / "report.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("schedule.scale_rule=a&amp;&quot;b&quot;"), std::string::npos);
  const std::string svg = read_file(tmp.path() / "report" / "test_acc.svg");
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("schedule.scale_rule=&lt;b&gt;"), std::string::npos);
  // Markdown escapes a '<' with a backslash (no HTML entity): none opens a tag.
  const std::string md = read_file(tmp.path() / "report" / "report.md");
  EXPECT_NE(md.find("\\<script"), std::string::npos);
  EXPECT_FALSE(std::regex_search(md, std::regex("[^\\\\]<[A-Za-z/!]"))) << md;
}

TEST(Report, RunningRunIsShownInProgress) {
  TempDir tmp;
  FakeRun r;
  write_run(tmp.path() / "runs", r);
  r.seed = 2;
  r.status = "running";
  r.test_acc = {0.4};
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].n, 1);
  EXPECT_EQ(d.groups[0].in_progress, 1);
  const std::string html = render_html(d);
  EXPECT_NE(html.find("<td>in progress</td>"), std::string::npos);
  EXPECT_NE(html.find("1 (+1 in progress)"), std::string::npos);
}

TEST(Report, WritesEveryFileAndFindsASingleRunDirectory) {
  TempDir tmp;
  FakeRun r;
  const fs::path dir = write_run(tmp.path() / "runs", r);
  ReportOptions o;
  o.inputs = {dir};  // a run directory itself
  o.out_dir = tmp.path() / "out" / "nested";
  const ReportSummary s = write_report(o);
  EXPECT_EQ(s.runs, 1u);
  for (const char* f : {"report.html", "report.md", "summary.csv", "groups.csv", "comparisons.csv", "test_acc.svg",
                        "train_loss.svg", "test_loss.svg", "lr.svg", "test_acc_wall.svg", "test_acc_steps.svg",
                        "test_acc_samples.svg", "test_loss_samples.svg"})
    EXPECT_TRUE(fs::exists(o.out_dir / f)) << f;
  EXPECT_EQ(s.files.size(), 13u);
  const std::string md = read_file(o.out_dir / "report.md");
  EXPECT_NE(md.find("](test_acc_wall.svg)"), std::string::npos);
  const std::string csv = read_file(o.out_dir / "summary.csv");
  EXPECT_NE(csv.find("\"replicas.count=1,schedule.scale_rule=none,seed=1\""), std::string::npos) << csv;
  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_EQ(html.find("http://", html.find("<body")), html.find("http://www.w3.org/2000/svg", html.find("<body")));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(Report, NoiseScaleChartMarksEachGroupsGlobalBatch) {
  TempDir tmp;
  FakeRun one;  // one replica: no noise scale
  write_run(tmp.path() / "runs", one);
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun small;
    small.replicas = 2;
    small.per_replica = 32;  // global 64
    small.seed = seed;
    small.noise_scale = {200, 500, 800 + 100.0 * seed};
    write_run(tmp.path() / "runs", small);
    FakeRun big;
    big.replicas = 4;
    big.per_replica = 256;  // global 1024
    big.seed = seed;
    big.noise_scale = {NAN, 100, 150};
    write_run(tmp.path() / "runs", big);
  }
  ReportOptions o = options_for(tmp);
  const ReportSummary s = write_report(o);
  const auto& d = s.data;
  const auto& small = group_labelled(d, "batch.per_replica=32, replicas.count=2");
  const auto& big = group_labelled(d, "batch.per_replica=256, replicas.count=4");
  EXPECT_EQ(small.global_batch, 64);
  EXPECT_NEAR(small.noise_scale_first, 200, 1e-9);
  EXPECT_NEAR(small.noise_scale_last, 950, 1e-9);  // mean of 900 and 1000
  EXPECT_NEAR(big.noise_scale_first, 100, 1e-9) << "the first epoch that has one";
  EXPECT_TRUE(std::isnan(group_labelled(d, "batch.per_replica=64, replicas.count=1").noise_scale_last));

  TempDir local;
  FakeRun stopped_reducing;  // local SGD from epoch 2: no estimate after epoch 1
  stopped_reducing.replicas = 2;
  stopped_reducing.noise_scale = {40, NAN, NAN};
  write_run(local.path() / "runs", stopped_reducing);
  const ReportData dl = analyze(options_for(local));
  EXPECT_NEAR(dl.groups[0].noise_scale_first, 40, 1e-9);
  EXPECT_TRUE(std::isnan(dl.groups[0].noise_scale_last)) << "epoch 1's estimate does not describe the end";
  EXPECT_EQ(render_markdown(dl).find("how many replicas pay off?"), std::string::npos);

  const std::string svg = read_file(o.out_dir / "noise_scale.svg");
  size_t refs = 0;
  for (size_t at = svg.find("class=\"reference\""); at != std::string::npos;
       at = svg.find("class=\"reference\"", at + 1))
    ++refs;
  EXPECT_EQ(refs, 2u) << "one dashed global-batch line per group with a noise scale";
  EXPECT_NE(svg.find("(global batch 1024)"), std::string::npos);
  EXPECT_EQ(svg.find("replicas.count=1"), std::string::npos) << "groups without a noise scale are left out";

  const std::string html = read_file(o.out_dir / "report.html");
  EXPECT_NE(html.find("how many replicas pay off?"), std::string::npos);
  EXPECT_NE(html.find("global batch 64 is 0.067 x B_noise (~950): far below B_noise"), std::string::npos);
  EXPECT_NE(html.find("global batch 1024 is 6.8 x B_noise (~150): far above B_noise"), std::string::npos);
  EXPECT_NE(html.find("<td>47% / no report.target_loss</td>"), std::string::npos)
      << "the prediction stands beside the measurement, or says why there is none";
  EXPECT_NE(read_file(o.out_dir / "report.md").find("](noise_scale.svg)"), std::string::npos);
  EXPECT_NE(read_file(o.out_dir / "groups.csv").find(",64,200,950,"), std::string::npos)
      << read_file(o.out_dir / "groups.csv");
  EXPECT_FALSE(fs::exists(o.out_dir / "test_acc_comm.svg")) << "no comm_bytes in these records";
}

TEST(Report, TestAccuracyAgainstCumulativeCommunicatedBytes) {
  TempDir tmp;
  FakeRun r;
  r.replicas = 2;
  r.comm_bytes = 2e6;  // every epoch
  r.test_acc = {0.5, 0.7, 0.8};
  write_run(tmp.path() / "runs", r);
  ReportOptions o = options_for(tmp);
  write_report(o);
  const std::string svg = read_file(o.out_dir / "test_acc_comm.svg");
  EXPECT_NE(svg.find("MB sent by rank 0 so far"), std::string::npos);
  // x = 2, 4, 6 MB (cumulative): the axis runs from 2.0 to 6.0.
  EXPECT_NE(svg.find(">2.0</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">6.0</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find(">6.5</text>"), std::string::npos) << svg;
  EXPECT_NE(read_file(o.out_dir / "report.md").find("](test_acc_comm.svg)"), std::string::npos);
  EXPECT_NE(read_file(o.out_dir / "groups.csv").find(",6000000,"), std::string::npos);
}

TEST(ReportBrowser, ChromiumDrawsChartsWithoutConsoleErrors) {
  if (run_command("command -v chromium").exit_code != 0) {
    if (ddplab::testing::required_by_environment("DDPLAB_REQUIRE_BROWSER"))
      FAIL() << "chromium not installed (scripts/test.sh installs it)";
    GTEST_SKIP() << "chromium not installed";
  }
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.images_per_s = 100.0 * replicas * 0.9;
      r.test_acc = {0.5 + 0.01 * seed, 0.7, 0.8 - 0.01 * replicas * (1 + 0.1 * seed)};
      // A long display name: its legend lines must wrap inside every chart, as Chromium measures them.
      r.spec_patch = {{"report",
                       {{"labels",
                         {{"replicas.count=2",
                           "two replicas on two processes of one node, per-replica "
                           "batch 64, linear lr scaling off, all-reduce every step"}}}}}};
      write_run(tmp.path() / "runs", r);
    }
  ReportOptions options = options_for(tmp);
  options.target_acc = 0.7;
  write_report(options);
  const std::string html = (tmp.path() / "report" / "report.html").string();
  const std::string flags =
      "chromium --headless --no-sandbox --disable-gpu --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync ";
  const auto dom = run_command("timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile1") +
                               " --dump-dom file://" + html + " 2>/dev/null");
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  for (const char* id : {"test_acc", "train_loss", "test_loss", "lr", "test_acc_wall", "acc_vs_batch",
                         "throughput_vs_replicas", "target_time_vs_replicas"}) {
    const std::string open = std::string("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-") + id + "\"";
    const size_t start = dom.output.find(open);
    ASSERT_NE(start, std::string::npos) << id;
    const std::string svg = dom.output.substr(start, dom.output.find("</svg>", start) - start);
    std::regex drawn("<path[^>]*class=\"line\"[^>]* d=\"M[0-9.]+,[0-9.]+ L");
    EXPECT_TRUE(std::regex_search(svg, drawn)) << id;
  }
  // One colour per group: the colour key's colour of each group is its legend colour in every
  // chart that names it (as Chromium parsed the page).
  std::map<std::string, std::string> key;
  const std::regex swatch(
      "<span class=\"swatch\" style=\"background:\\s*(#[0-9A-Fa-f]{6}|rgb[^;\"]*);?\"></span>([^<]*)<");
  for (auto it = std::sregex_iterator(dom.output.begin(), dom.output.end(), swatch); it != std::sregex_iterator(); ++it)
    key[(*it)[2].str()] = (*it)[1].str();
  ASSERT_EQ(key.size(), 2u) << dom.output.substr(0, 4000);
  const std::regex legend(
      "<g class=\"legend\"><line [^>]*stroke=\"(#[0-9A-Fa-f]{6})\"[^>]*>(</line>)?<text [^>]*>([^<]*)");
  size_t matched = 0;
  for (auto it = std::sregex_iterator(dom.output.begin(), dom.output.end(), legend); it != std::sregex_iterator();
       ++it) {
    // A long label wraps: its first line starts the group's label.
    const std::string first_line = (*it)[3].str();
    const auto k = std::find_if(key.begin(), key.end(), [&](const auto& kv) {
      return !first_line.empty() && kv.first.rfind(first_line, 0) == 0;
    });
    if (k == key.end()) continue;
    ++matched;
    EXPECT_EQ(k->second.front() == '#' ? k->second : std::string(), (*it)[1].str()) << (*it)[3].str();
  }
  EXPECT_GE(matched, 16u) << "both groups in the 8 per-epoch charts";
  // Units: accuracy in percent, epochs in whole numbers.
  const size_t acc_at = dom.output.find("id=\"chart-test_acc\"");
  const std::string acc = dom.output.substr(acc_at, dom.output.find("</svg>", acc_at) - acc_at);
  EXPECT_NE(acc.find("test accuracy (%)"), std::string::npos);
  const std::regex y_tick("text-anchor=\"end\">([0-9.]+)</text>"), x_tick("text-anchor=\"middle\">([0-9.]+)</text>");
  for (auto it = std::sregex_iterator(acc.begin(), acc.end(), y_tick); it != std::sregex_iterator(); ++it)
    EXPECT_GE(std::stod((*it)[1].str()), 10) << "a percent, not a fraction";
  for (auto it = std::sregex_iterator(acc.begin(), acc.end(), x_tick); it != std::sregex_iterator(); ++it)
    EXPECT_EQ((*it)[1].str().find('.'), std::string::npos) << "an epoch tick " << (*it)[1].str();
  const size_t thr_at = dom.output.find("id=\"chart-throughput_vs_replicas\"");
  const std::string thr = dom.output.substr(thr_at, dom.output.find("</svg>", thr_at) - thr_at);
  size_t replica_ticks = 0;
  for (auto it = std::sregex_iterator(thr.begin(), thr.end(), x_tick); it != std::sregex_iterator();
       ++it, ++replica_ticks)
    EXPECT_EQ((*it)[1].str().find('.'), std::string::npos) << "a replica tick " << (*it)[1].str();
  EXPECT_EQ(replica_ticks, 2u) << "replicas 1 and 2, nothing between";
  const size_t batch_at = dom.output.find("id=\"chart-acc_vs_batch\"");
  EXPECT_NE(dom.output.substr(batch_at, dom.output.find("</svg>", batch_at) - batch_at).find("final test accuracy (%)"),
            std::string::npos);
  // The comparisons table renders its 95% CI column with an interval in it.
  const size_t table = dom.output.find("<table class=\"significance\">");
  ASSERT_NE(table, std::string::npos) << dom.output;
  const std::string sig = dom.output.substr(table, dom.output.find("</table>", table) - table);
  EXPECT_NE(sig.find("<th>95% CI</th>"), std::string::npos) << sig;
  EXPECT_NE(sig.find("<th>adjusted p</th>"), std::string::npos) << sig;
  EXPECT_TRUE(std::regex_search(sig, std::regex("<td>[+-][0-9]+\\.[0-9]{2} to [+-][0-9]+\\.[0-9]{2}</td>"))) << sig;
  // The summary comes first and holds a row per change, with its interval.
  const size_t summary = dom.output.find("<table class=\"summary\">");
  ASSERT_NE(summary, std::string::npos) << dom.output;
  EXPECT_LT(summary, table);
  const std::string sum = dom.output.substr(summary, dom.output.find("</table>", summary) - summary);
  EXPECT_NE(sum.find("<td>replicas.count</td><td>1 \xE2\x86\x92 2</td>"), std::string::npos) << sum;
  EXPECT_TRUE(std::regex_search(sum, std::regex("<td>[+-][0-9]+\\.[0-9]{2} pts \\([+-][0-9.]+ to [+-][0-9.]+\\)</td>")))
      << sum;
  // No legend text clips: a copy of the page with a script (the report has none) that asks
  // Chromium for every legend line's box and writes what sticks out of its chart.
  const std::string page = read_file(html);
  const std::string probe =
      "<script>let n = 0, out = [];"
      "for (const svg of document.querySelectorAll('svg.chart')) {"
      "  const w = svg.viewBox.baseVal.width, h = svg.viewBox.baseVal.height;"
      "  for (const t of svg.querySelectorAll('g.legend text')) {"
      "    const b = t.getBBox(); ++n;"
      "    if (b.x < 0 || b.x + b.width > w || b.y + b.height > h) out.push(svg.id + ': ' + t.textContent);"
      "  }"
      "}"
      "const pre = document.createElement('pre'); pre.id = 'clip-check';"
      "pre.textContent = 'legends ' + n + ' clipped ' + out.length + ' ' + out.join(' | ');"
      "document.body.appendChild(pre);</script>";
  write_file(tmp.path() / "probe.html", page.substr(0, page.rfind("</body>")) + probe + "</body></html>\n");
  const auto measured = run_command("timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile3") +
                                    " --dump-dom file://" + tmp.str("probe.html") + " 2>/dev/null");
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  std::smatch clip;
  ASSERT_TRUE(std::regex_search(measured.output, clip, std::regex("legends ([0-9]+) clipped ([0-9]+)([^<]*)")))
      << measured.output.substr(measured.output.size() > 2000 ? measured.output.size() - 2000 : 0);
  const size_t legends = count_of(page, "<g class=\"legend\">");
  EXPECT_GT(legends, 10u);
  EXPECT_EQ(static_cast<size_t>(std::stoi(clip[1].str())), legends) << "every legend entry was measured";
  EXPECT_EQ(clip[2].str(), "0") << clip[3].str();
  const auto shot = run_command(
      "timeout 120 " + flags + "--user-data-dir=" + tmp.str("profile2") +
      " --enable-logging=stderr --v=0 --window-size=1200,2000 --screenshot=" + tmp.str("shot.png") + " file://" + html);
  EXPECT_EQ(shot.exit_code, 0) << shot.output;
  EXPECT_TRUE(fs::exists(tmp.path() / "shot.png")) << shot.output;
  EXPECT_EQ(shot.output.find("Uncaught"), std::string::npos) << shot.output;
  EXPECT_EQ(shot.output.find("CONSOLE"), std::string::npos) << shot.output;
}
