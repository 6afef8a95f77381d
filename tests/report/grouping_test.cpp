// report/grouping.cpp: runs into groups by their specs, the groups' labels, followers and the
// swept settings.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/report/analysis.h"
#include "report/fake_run.h"
#include "report/report_helpers.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ddplab;
using namespace ddplab::report;
using ddplab::testing::csv_cell;
using ddplab::testing::FakeRun;
using ddplab::testing::group_labelled;
using ddplab::testing::options_for;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;
using ddplab::testing::write_run;

TEST(Report, GroupsRunsThatDifferOnlyInSeed) {
  TempDir tmp;
  const std::vector<std::vector<double>> accs = {{0.5, 0.86}, {0.5, 0.87}, {0.5, 0.85}};
  for (int seed = 1; seed <= 3; ++seed) {
    for (int replicas : {1, 2}) {
      FakeRun r;
      r.seed = seed;
      r.replicas = replicas;
      r.test_acc = accs[seed - 1];
      if (replicas == 2) r.test_acc.back() -= 0.02;
      write_run(tmp.path() / "runs", r);
    }
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.runs.size(), 6u);
  ASSERT_EQ(d.groups.size(), 2u);
  EXPECT_EQ(d.differing_keys, std::vector<std::string>{"replicas.count"});
  EXPECT_EQ(d.groups[0].label, "replicas.count=1");
  EXPECT_EQ(d.groups[1].label, "replicas.count=2");
  for (const auto& g : d.groups) EXPECT_EQ(g.n, 3);
  EXPECT_NEAR(d.groups[0].final_test_acc.mean, 0.86, 1e-12);
  EXPECT_NEAR(d.groups[0].final_test_acc.std, 0.01, 1e-12);
  EXPECT_NEAR(d.groups[1].final_test_acc.mean, 0.84, 1e-12);
  EXPECT_NEAR(d.groups[0].best_test_acc.mean, 0.86, 1e-12);
  EXPECT_NEAR(d.groups[0].final_train_loss.mean, 0.5, 1e-12);
  EXPECT_NEAR(d.groups[0].final_test_loss.mean, 0.6, 1e-12);
}

// A run written before a spec field existed groups with today's run that leaves it at its default.
TEST(Report, AnOlderSpecWithoutANewFieldGroupsWithItsDefault) {
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.run_id = "old-" + std::to_string(seed);
    write_run(tmp.path() / "runs", r);
    r.run_id = "new-" + std::to_string(seed);
    r.seed = seed + 2;
    r.spec_patch = {{"model", {{"ema_decay", 0}}}, {"log", {{"every_steps", 0}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.runs.size(), 4u);
  EXPECT_EQ(d.groups.size(), 1u);
}

// Launcher settings (config/field_roles.h) do not group: a run restarted after a failure gives the
// records of one never stopped. Until the roles, the report split runs by replicas.timeout_s,
// replicas.max_restarts, debug.rank and debug.step (though not by slurm.*); log settings still
// split them, since they decide which records a run has.
TEST(Report, RunsThatDifferOnlyInHowTheyAreLaunchedGroupTogether) {
  TempDir tmp;
  const std::vector<json> launches = {json::object(),
                                      {{"replicas", {{"timeout_s", 30}, {"max_restarts", 2}}},
                                       {"debug", {{"rank", 0}, {"step", 7}, {"fault", "crash"}}}},
                                      {{"slurm", {{"partition", "gpu"}}}}};
  for (size_t i = 0; i < launches.size(); ++i) {
    FakeRun r;
    r.seed = static_cast<int>(i) + 1;
    r.spec_patch = launches[i];
    write_run(tmp.path() / "runs", r);
  }
  FakeRun logged;
  logged.seed = 4;
  logged.spec_patch = {{"log", {{"every_steps", 5}}}};
  write_run(tmp.path() / "runs", logged);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 2u);
  EXPECT_EQ(d.differing_keys, std::vector<std::string>{"log.every_steps"});
  EXPECT_EQ(group_labelled(d, "log.every_steps=0").n, 3);
}

TEST(Report, LabelsNameEveryDifferingKey) {
  TempDir tmp;
  for (int replicas : {1, 2})
    for (const char* rule : {"none", "linear"}) {
      FakeRun r;
      r.replicas = replicas;
      r.scale_rule = rule;
      write_run(tmp.path() / "runs", r);
    }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 4u);
  EXPECT_NO_THROW(group_labelled(d, "replicas.count=2, schedule.scale_rule=linear"));
  // 4 groups in a 2x2 grid: 4 pairs differ in exactly one key, 2 diagonals are not compared.
  EXPECT_EQ(d.comparisons.size(), 4u);
}

TEST(Report, ThreadsSplitByReplicaCountStillComparesReplicaCounts) {
  // replicas.threads "auto" resolves to cores / replicas: 1 x 2 threads vs 2 x 1 thread is one
  // choice (the replica count), and the report must still test it.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed) {
    FakeRun r;
    r.seed = seed;
    r.threads = 2;
    r.test_acc = {0.86 + 0.001 * seed};
    write_run(tmp.path() / "runs", r);
    r.replicas = 2;
    r.threads = 1;
    r.test_acc = {0.84 + 0.001 * seed};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "replicas.count");
  EXPECT_EQ(d.comparisons[0].value_a + " vs " + d.comparisons[0].value_b, "1 vs 2");
  EXPECT_NE(render_markdown(d).find("replicas.count: 1 vs 2 (replicas.threads: 2 vs 1 follows)"), std::string::npos)
      << render_markdown(d);
  // The follower is named once in the opening, not in every label.
  EXPECT_EQ(d.groups[0].label, "replicas.count=1");
  EXPECT_EQ(d.groups[1].label, "replicas.count=2");
  EXPECT_NE(render_markdown(d).find("`replicas.threads follows replicas.count` (left out of the labels)"),
            std::string::npos);
}

TEST(Report, ThreadsThatDoNotFollowTheReplicaCountStayInTheLabels) {
  TempDir tmp;
  for (int threads : {1, 2}) {
    FakeRun r;
    r.threads = threads;
    r.run_id = fmt::format("t{}", threads);
    write_run(tmp.path() / "runs", r);
  }
  FakeRun r;
  r.replicas = 2;
  r.threads = 1;
  write_run(tmp.path() / "runs", r);
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 3u);
  group_labelled(d, "replicas.count=1, replicas.threads=2");
  EXPECT_TRUE(d.follower_notes.empty());
}

TEST(Report, LabelsMapNamesGroups) {
  TempDir tmp;
  for (int replicas : {1, 2}) {
    FakeRun r;
    r.replicas = replicas;
    r.spec_patch = {{"report", {{"labels", {{"replicas.count=2", "2 GPUs"}}}}}};
    write_run(tmp.path() / "runs", r);
  }
  const ReportData d = analyze(options_for(tmp));
  group_labelled(d, "replicas.count=1");
  group_labelled(d, "2 GPUs");
  EXPECT_NE(render_charts(d).front().svg.find(">2 GPUs<"), std::string::npos);
}

TEST(Report, LabelsLeaveOutKeysAGroupDoesNotSet) {
  TempDir tmp;
  const std::vector<json> syncs = {"allreduce", json::parse(R"({"local_sgd": {"period": 4, "start_epoch": 1}})"),
                                   json::parse(R"({"local_sgd": {"period": 16, "start_epoch": 1}})")};
  for (size_t i = 0; i < syncs.size(); ++i) {
    FakeRun r;
    r.replicas = 4;
    r.run_id = "sync" + std::to_string(i);
    const fs::path dir = write_run(tmp.path() / "runs", r);
    json spec = json::parse(read_file(dir / "spec.json"));
    spec["replicas"]["sync"] = syncs[i];
    write_file(dir / "spec.json", spec.dump());
  }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 3u);
  group_labelled(d, "replicas.sync=allreduce");
  group_labelled(d, "replicas.sync.local_sgd.period=4, replicas.sync.local_sgd.start_epoch=1");
  group_labelled(d, "replicas.sync.local_sgd.period=16, replicas.sync.local_sgd.start_epoch=1");
  // The two local SGD groups differ in one key and are compared.
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "replicas.sync.local_sgd.period");
}

TEST(Report, ZippedSettingsAreComparedAsOneChoice) {
  // sweep_zip {optimizer.name: [sgd, adam], optimizer.lr: [0.05, 0.001]} x replicas.count [1, 2]:
  // the optimizer and its lr always change together, so they are one setting, compared as one.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (int replicas : {1, 2})
      for (const auto& [name, lr] : {std::pair{"sgd", 0.05}, std::pair{"adam", 0.001}}) {
        FakeRun r;
        r.seed = seed;
        r.replicas = replicas;
        r.run_id = fmt::format("{}-r{}-s{}", name, replicas, seed);
        r.spec_patch = {{"optimizer", {{"name", name}, {"lr", lr}}}};
        r.test_acc = {std::string(name) == "adam" ? 0.80 + 0.01 * seed : 0.85 + 0.0105 * seed};
        write_run(tmp.path() / "runs", r);
      }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.settings.size(), 2u);
  EXPECT_EQ(d.settings[0].name, "optimizer.lr + optimizer.name");
  EXPECT_EQ(d.settings[1].name, "replicas.count");
  group_labelled(d, "optimizer.lr=0.001, optimizer.name=adam, replicas.count=2");
  ASSERT_EQ(d.comparisons.size(), 4u) << "two optimizer changes, two replica changes";
  const auto changes = summary_changes(d);
  ASSERT_EQ(changes.size(), 4u);
  const GroupComparison& first = d.comparisons[changes[0].comparison];
  EXPECT_EQ(first.key, "optimizer.lr + optimizer.name");
  EXPECT_EQ(first.value_a + " > " + first.value_b, "0.001, adam > 0.05, sgd");
  EXPECT_EQ(changes[0].at, "replicas.count=1");
  EXPECT_EQ(first.stats.verdict, Verdict::b_better) << "5.05 and 5.10 points";
  EXPECT_EQ(changes[2].at, "optimizer.lr=0.001, optimizer.name=adam");
  EXPECT_NE(render_markdown(d).find("| optimizer.lr + optimizer.name | 0.001, adam \xE2\x86\x92 0.05, sgd |"),
            std::string::npos)
      << render_markdown(d);
  EXPECT_NE(
      render_html(d).find(
          "<code>optimizer.lr + optimizer.name</code> (keys that always change together: compared as one setting)."),
      std::string::npos);
}

TEST(Report, ALayerListIsNamedByTheKeysTheSweepChanged) {
  // model.layers at two widths (sweep_zip of model.layers.0.channels and model.layers.3.channels):
  // the labels and the comparison name those keys, not the whole list.
  TempDir tmp;
  for (int seed = 1; seed <= 2; ++seed)
    for (const auto& [c0, c3] : {std::pair{8, 16}, std::pair{32, 64}}) {
      FakeRun r;
      r.seed = seed;
      r.run_id = fmt::format("w{}-s{}", c0, seed);
      r.spec_patch = {{"model",
                       {{"layers", json::array({{{"type", "conv"}, {"channels", c0}, {"kernel", 3}},
                                                {{"type", "relu"}},
                                                {{"type", "max_pool"}, {"kernel", 2}},
                                                {{"type", "conv"}, {"channels", c3}, {"kernel", 3}},
                                                {{"type", "flatten"}},
                                                {{"type", "linear"}, {"features", 10}}})}}}};
      write_run(tmp.path() / "runs", r);
    }
  const ReportData d = analyze(options_for(tmp));
  ASSERT_EQ(d.groups.size(), 2u);
  group_labelled(d, "model.layers.0.channels=8, model.layers.3.channels=16");
  ASSERT_EQ(d.comparisons.size(), 1u);
  EXPECT_EQ(d.comparisons[0].key, "model.layers.0.channels + model.layers.3.channels");
  EXPECT_EQ(d.comparisons[0].value_a + " > " + d.comparisons[0].value_b, "8, 16 > 32, 64");
  EXPECT_EQ(csv_cell(render_groups_csv(d), 1, "model.layers.3.channels"), "64");
}
