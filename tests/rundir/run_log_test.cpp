#include "ddplab/rundir/run_log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "test_util.h"

namespace ddplab::rundir {
namespace {

namespace fs = std::filesystem;
using ddplab::testing::error_of;
using ddplab::testing::FileSizeLimit;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;

config::ExperimentSpec make_spec(const TempDir& tmp, int64_t seed = 1) {
  return config::resolve(nlohmann::json{{"name", "t"}, {"output", tmp.str()}, {"seed", seed}});
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::istringstream in(read_file(file));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string header() {
  std::string h;
  for (const auto& c : EpochRecord::csv_columns()) h += (h.empty() ? "" : ",") + c;
  return h;
}

EpochRecord record(int epoch) {
  EpochRecord r;
  r.epoch = epoch;
  r.step = 100 * epoch;
  r.lr = 0.05;
  r.train_loss = 0.5;
  r.train_acc = 0.75;
  r.test_loss = 0.25;
  r.test_acc = 0.875;
  r.replicas = 2;
  r.global_batch = 128;
  return r;
}

// Every field set, none at its default: a field that from_json dropped would show.
EpochRecord full_record() {
  EpochRecord r = record(3);
  r.epoch_s = 1.0 / 3;
  r.wall_s = 12.5;
  r.images_per_s = 123456789.123;
  r.comm_wait_s = 0.125;
  r.grad_norm = 2.5;
  r.grad_noise_scale = 1e-12;
  r.gns_trace_ema = 640.25;
  r.gns_grad_sq_ema = 3.75;
  r.comm_bytes = 12345678901;
  r.replica_drift = 0.0625;
  r.host_cpu_wait_pct = 12.5;
  r.host_steal_pct = 0.25;
  r.val_loss = 0.375;
  r.val_acc = 0.8125;
  r.audit_warnings = {"update audit failed in epoch 3: parameter 'fc1.bias' did not change", "second"};
  return r;
}

void expect_same(const EpochRecord& a, const EpochRecord& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.train_loss, b.train_loss);
  EXPECT_EQ(a.train_acc, b.train_acc);
  EXPECT_EQ(a.test_loss, b.test_loss);
  EXPECT_EQ(a.test_acc, b.test_acc);
  EXPECT_EQ(a.epoch_s, b.epoch_s);
  EXPECT_EQ(a.wall_s, b.wall_s);
  EXPECT_EQ(a.images_per_s, b.images_per_s);
  EXPECT_EQ(a.comm_wait_s, b.comm_wait_s);
  EXPECT_EQ(a.grad_norm, b.grad_norm);
  EXPECT_EQ(a.grad_noise_scale, b.grad_noise_scale);
  EXPECT_EQ(a.gns_trace_ema, b.gns_trace_ema);
  EXPECT_EQ(a.gns_grad_sq_ema, b.gns_grad_sq_ema);
  EXPECT_EQ(a.comm_bytes, b.comm_bytes);
  EXPECT_EQ(a.replica_drift, b.replica_drift);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.global_batch, b.global_batch);
  EXPECT_EQ(a.host_cpu_wait_pct, b.host_cpu_wait_pct);
  EXPECT_EQ(a.host_steal_pct, b.host_steal_pct);
  EXPECT_EQ(a.val_loss, b.val_loss);
  EXPECT_EQ(a.val_acc, b.val_acc);
  EXPECT_EQ(a.audit_warnings, b.audit_warnings);
}

std::string from_json_error(const nlohmann::json& j) {
  try {
    EpochRecord::from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RunLog, EpochRecordRoundTripsThroughJsonWithOptionalFieldsPresent) {
  const EpochRecord r = full_record();
  expect_same(EpochRecord::from_json(r.to_json()), r);
  // As epochs.jsonl holds it: dumped and parsed again.
  expect_same(EpochRecord::from_json(nlohmann::json::parse(r.to_json().dump())), r);
}

TEST(RunLog, EpochRecordRoundTripsThroughJsonWithOptionalFieldsNull) {
  const EpochRecord r = record(2);
  const auto j = nlohmann::json::parse(r.to_json().dump());
  ASSERT_TRUE(j.at("grad_noise_scale").is_null());
  const EpochRecord back = EpochRecord::from_json(j);
  expect_same(back, r);
  EXPECT_FALSE(back.grad_noise_scale || back.gns_trace_ema || back.gns_grad_sq_ema || back.replica_drift ||
               back.host_cpu_wait_pct || back.host_steal_pct);
}

// debug.audits "warn": the failed audits' messages; a record without any has no such key (so a
// run without warnings writes the records it wrote before the field existed), and the CSV none.
TEST(RunLog, AuditWarningsAreWrittenOnlyWhenThereAreSome) {
  EpochRecord r = record(2);
  EXPECT_FALSE(r.to_json().contains("audit_warnings"));
  EXPECT_TRUE(EpochRecord::from_json(r.to_json()).audit_warnings.empty());
  const std::string csv_without = r.csv_row();
  r.audit_warnings = {"replica consistency audit failed after epoch 2: parameter 'fc1.weight' differs"};
  EXPECT_EQ(r.to_json().at("audit_warnings"), nlohmann::json::array({r.audit_warnings[0]}));
  EXPECT_EQ(EpochRecord::from_json(nlohmann::json::parse(r.to_json().dump())).audit_warnings, r.audit_warnings);
  EXPECT_EQ(r.csv_row(), csv_without) << "not a CSV column";
}

// Without a validation split the record has no val_ keys: such a run writes the records it wrote
// before the fields existed. The CSV has the columns, empty.
TEST(RunLog, ValidationMetricsAreWrittenOnlyWithASplit) {
  EpochRecord r = record(2);
  EXPECT_FALSE(r.to_json().contains("val_loss") || r.to_json().contains("val_acc"));
  const std::string without = r.csv_row();
  EXPECT_EQ(without.substr(without.size() - 4), ",,,,") << without;
  r.val_loss = 0.5;
  r.val_acc = 0.75;
  const auto back = EpochRecord::from_json(nlohmann::json::parse(r.to_json().dump()));
  EXPECT_EQ(back.val_loss, 0.5);
  EXPECT_EQ(back.val_acc, 0.75);
  EXPECT_EQ(r.csv_row(), without.substr(0, without.size() - 1) + "0.5,0.75");
}

TEST(RunLog, MalformedAuditWarningsAreNamed) {
  auto j = record(1).to_json();
  j["audit_warnings"] = "one";
  EXPECT_EQ(from_json_error(j), "audit_warnings: expected an array of strings, got \"one\"");
  j["audit_warnings"] = {"a", 1};
  EXPECT_EQ(from_json_error(j), "audit_warnings: expected an array of strings, got [\"a\",1]");
}

// The fields a record's comparisons leave out are the ones named as timing or loading the machine,
// and only those: every training figure (loss, accuracy, lr, norms, the noise scale) is compared.
TEST(RunLog, MachineFieldsAreTheTimingAndHostLoadFieldsByTheirNames) {
  const std::vector<std::string> expected = {"epoch_s",           "wall_s",        "images_per_s", "comm_wait_s",
                                             "host_cpu_wait_pct", "host_steal_pct"};
  EXPECT_EQ(EpochRecord::machine_fields(), expected);
}

// JSON has no NaN: to_json's NaN is written as null and read back as NaN.
TEST(RunLog, EpochRecordNonFiniteNumberReadsBackAsNaN) {
  EpochRecord r = record(1);
  r.train_loss = std::numeric_limits<double>::quiet_NaN();
  const auto j = nlohmann::json::parse(r.to_json().dump());
  ASSERT_TRUE(j.at("train_loss").is_null());
  EXPECT_TRUE(std::isnan(EpochRecord::from_json(j).train_loss));
}

// Records written before the noise-scale, drift, byte and host-load fields existed still read.
TEST(RunLog, EpochRecordWithoutTheLaterFieldsReads) {
  auto j = full_record().to_json();
  for (const char* k : {"grad_noise_scale", "gns_trace_ema", "gns_grad_sq_ema", "comm_bytes", "replica_drift",
                        "host_cpu_wait_pct", "host_steal_pct"})
    j.erase(k);
  const EpochRecord r = EpochRecord::from_json(j);
  EXPECT_FALSE(r.grad_noise_scale || r.gns_trace_ema || r.gns_grad_sq_ema || r.replica_drift || r.host_cpu_wait_pct ||
               r.host_steal_pct || r.comm_bytes);
  EXPECT_EQ(r.to_json()["comm_bytes"], nlohmann::json()) << "unknown, not 0";
  EXPECT_EQ(r.global_batch, 128);
}

TEST(RunLog, EpochRecordWithAWrongOrMissingFieldIsAnErrorNamingIt) {
  auto with = [](const char* key, nlohmann::json value) {
    auto j = record(1).to_json();
    j[key] = std::move(value);
    return j;
  };
  EXPECT_EQ(from_json_error(with("lr", "fast")), "lr: expected a number, got \"fast\"");
  EXPECT_EQ(from_json_error(with("epoch", 1.5)), "epoch: expected an integer, got 1.5");
  EXPECT_EQ(from_json_error(with("replicas", nullptr)), "replicas: expected an integer, got null");
  EXPECT_EQ(from_json_error(with("comm_bytes", "many")), "comm_bytes: expected an integer, got \"many\"");
  EXPECT_EQ(from_json_error(with("grad_noise_scale", true)), "grad_noise_scale: expected a number or null, got true");
  EXPECT_EQ(from_json_error(with("epoch", int64_t{1} << 40)),
            "epoch: expected an integer that fits in 32 bits, got 1099511627776");
  auto missing = record(1).to_json();
  missing.erase("test_acc");
  EXPECT_EQ(from_json_error(missing), "test_acc: missing (expected a number)");
  EXPECT_EQ(from_json_error(nlohmann::json::array({1, 2})), "expected a JSON object (an epoch record), got [1,2]");
}

// epochs.csv's number format: 10 significant digits, integers as they are, an unset field empty.
StepRecord step_record(int64_t step, int64_t interval_steps) {
  StepRecord r;
  r.step = step;
  r.epoch = step / 64.0;
  r.interval_steps = interval_steps;
  r.lr = 0.0125;
  r.train_loss = 1.0 / 3;
  r.train_acc = 0.625;
  r.samples = 128 * step;
  r.elapsed_s = 2.5;
  return r;
}

TEST(RunLog, StepRecordRoundTripsThroughJson) {
  const StepRecord r = step_record(70, 6);
  const StepRecord back = StepRecord::from_json(nlohmann::json::parse(r.to_json().dump()));
  EXPECT_EQ(back.step, 70);
  EXPECT_DOUBLE_EQ(back.epoch, 70 / 64.0);
  EXPECT_EQ(back.interval_steps, 6);
  EXPECT_DOUBLE_EQ(back.lr, 0.0125);
  EXPECT_DOUBLE_EQ(back.train_loss, 1.0 / 3);
  EXPECT_DOUBLE_EQ(back.train_acc, 0.625);
  EXPECT_EQ(back.samples, 128 * 70);
  EXPECT_DOUBLE_EQ(back.elapsed_s, 2.5);
}

// log.eval_every_steps' fields are written only at an evaluation point, so a record without one
// is the line it was before the fields existed.
TEST(RunLog, StepRecordHoldsAnEvaluationPointOnlyWhereOneWasMade) {
  StepRecord r = step_record(70, 6);
  EXPECT_FALSE(r.to_json().contains("eval_acc"));
  EXPECT_EQ(r.to_json().size(), 8U);
  EXPECT_FALSE(StepRecord::from_json(r.to_json()).eval_acc.has_value());
  r.eval_loss = 0.75;
  r.eval_acc = 0.8125;
  const StepRecord back = StepRecord::from_json(nlohmann::json::parse(r.to_json().dump()));
  EXPECT_EQ(back.eval_loss, 0.75);
  EXPECT_EQ(back.eval_acc, 0.8125);
  auto j = r.to_json();
  j["eval_acc"] = "high";
  EXPECT_EQ(error_of([&] { StepRecord::from_json(j); }), "eval_acc: expected a number or null, got \"high\"");
}

TEST(RunLog, StepRecordWithAWrongOrMissingFieldIsAnErrorNamingIt) {
  auto j = step_record(10, 10).to_json();
  j["samples"] = 1.5;
  EXPECT_EQ(error_of([&] { StepRecord::from_json(j); }), "samples: expected an integer, got 1.5");
  j = step_record(10, 10).to_json();
  j.erase("interval_steps");
  EXPECT_EQ(error_of([&] { StepRecord::from_json(j); }), "interval_steps: missing (expected an integer)");
  EXPECT_EQ(error_of([&] { StepRecord::from_json(nlohmann::json::array()); }),
            "expected a JSON object (a step record), got []");
}

// A run killed after its checkpoint at step 64 had written records up to step 90 (and half a
// line): resuming keeps the records through step 64 only, so the steps run again are recorded once.
TEST(RunLog, ResumeDropsTheStepRecordsAfterTheCheckpointsStep) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog run = RunLog::create(spec, false);
  run.append(record(1));
  run.append(record(2));
  run.append_steps({step_record(30, 30), step_record(60, 30), step_record(64, 4)});
  run.append_steps({step_record(90, 26)});
  append_line(steps_file(run.dir()), R"({"step": 120, "epo)");
  write_file_atomic(checkpoint_file(run.dir()), "not read here");
  run.update_manifest(
      {{"status", "failed"}, {"checkpoint", {{"records", 1}, {"global_step", 64}, {"epochs_done", 1}}}});

  // A spec.json written before the log section existed still resumes.
  auto old_spec = read_json(spec_file(run.dir()));
  old_spec.erase("log");
  write_file_atomic(spec_file(run.dir()), old_spec.dump());
  auto resumed = RunLog::resume(spec, "test");
  ASSERT_TRUE(resumed.has_value());
  const auto lines = lines_of(steps_file(run.dir()));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(StepRecord::from_json(nlohmann::json::parse(lines[2])).step, 64);
  EXPECT_EQ(lines_of(epochs_file(run.dir())).size(), 1u);
}

// A run begun under an older header (fewer columns) goes on under today's: the CSV is made anew
// from the records epochs.jsonl keeps.
TEST(RunLog, ResumeWritesTheCsvAnewFromTheKeptRecords) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog run = RunLog::create(spec, false);
  run.append(record(1));
  run.append(record(2));
  write_file_atomic(epochs_csv_file(run.dir()), "epoch,step\n1,100\n2,200\n");
  write_file_atomic(checkpoint_file(run.dir()), "not read here");
  run.update_manifest(
      {{"status", "failed"}, {"checkpoint", {{"records", 1}, {"global_step", 100}, {"epochs_done", 1}}}});
  ASSERT_TRUE(RunLog::resume(spec, "test").has_value());
  const auto csv = lines_of(epochs_csv_file(run.dir()));
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[0], fmt::format("{}", fmt::join(EpochRecord::csv_columns(), ",")));
  EXPECT_EQ(csv[1], record(1).csv_row());
}

TEST(RunLog, CsvRowFormatsNumbersWithTenSignificantDigits) {
  EXPECT_EQ(full_record().csv_row(),
            "3,300,0.05,0.5,0.75,0.25,0.875,0.3333333333,12.5,123456789.1,0.125,2.5,1e-12,640.25,3.75,12345678901,"
            "0.0625,2,128,12.5,0.25,0.375,0.8125");
  EXPECT_EQ(record(1).csv_row(), "1,100,0.05,0.5,0.75,0.25,0.875,0,0,0,0,0,,,,0,,2,128,,,,");
}

TEST(RunLog, UtcTimesAreIso8601UtcToTheMillisecond) {
  const std::string now = utc_now();
  ASSERT_EQ(now.size(), 24u) << now;
  EXPECT_EQ(now[4], '-');
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now[13], ':');
  EXPECT_EQ(now[19], '.');
  EXPECT_EQ(now.back(), 'Z');
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764664563125));
  EXPECT_EQ(utc_text(t), "2025-12-02T08:36:03.125Z");
}

TEST(RunLog, ManifestTimesReadWithAndWithoutMilliseconds) {
  const nlohmann::json manifest = {{"start", "2025-12-02T08:36:03.125Z"},
                                   {"end", "2025-12-02T08:36:03Z"},
                                   {"bad", "2025-12-02 08:36:03"},
                                   {"trailing", "2025-12-02T08:36:03.5Zx"},
                                   {"exponent", "2025-12-02T08:36:03.5e3Z"},
                                   {"no_digit", "2025-12-02T08:36:03.Z"},
                                   {"number", 3}};
  EXPECT_DOUBLE_EQ(manifest_time(manifest, "start").value(), 1764664563.125);
  EXPECT_DOUBLE_EQ(manifest_time(manifest, "end").value(), 1764664563.0);
  EXPECT_FALSE(manifest_time(manifest, "bad"));
  EXPECT_FALSE(manifest_time(manifest, "trailing"));
  EXPECT_FALSE(manifest_time(manifest, "exponent"));
  EXPECT_FALSE(manifest_time(manifest, "no_digit"));
  EXPECT_FALSE(manifest_time(manifest, "number"));
  EXPECT_FALSE(manifest_time(manifest, "missing"));
  EXPECT_FALSE(manifest_time(nlohmann::json::array(), "start"));
  const auto now = std::chrono::system_clock::now();
  const double seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  EXPECT_NEAR(manifest_time({{"t", utc_text(now)}}, "t").value(), seconds, 1e-3);
}

TEST(RunLog, RankFileNamesNameTheRank) {
  EXPECT_EQ(rank_log_file("d", 3), fs::path("d") / "rank-3.log");
  EXPECT_EQ(rank_error_file("d", 12), fs::path("d") / "rank-12.error");
  EXPECT_EQ(temp_file("d/manifest.json"), fs::path("d/manifest.json.tmp"));
}

TEST(RunLog, CreateMakesTheRunDirectoryWithSpecManifestAndCsvHeader) {
  TempDir tmp;
  auto spec = make_spec(tmp, 7);
  RunLog run = RunLog::create(spec, false);
  fs::path dir = tmp.path() / "t" / "seed=7";
  EXPECT_EQ(run.dir(), dir);
  EXPECT_EQ(run_dir(spec), dir);
  EXPECT_EQ(run_id(spec), "seed=7");
  ASSERT_TRUE(fs::is_directory(dir));

  auto written_spec = read_json(dir / "spec.json");
  EXPECT_EQ(written_spec, spec.resolved);
  EXPECT_EQ(written_spec.at("name"), "t");

  auto manifest = read_json(dir / "manifest.json");
  EXPECT_EQ(manifest.at("status"), "running");
  EXPECT_TRUE(manifest.at("end").is_null());
  ASSERT_TRUE(manifest.at("libtorch").is_string());
  EXPECT_FALSE(manifest.at("libtorch").get<std::string>().empty());
  EXPECT_EQ(manifest.at("experiment"), "t");
  EXPECT_EQ(manifest.at("run_id"), "seed=7");
  EXPECT_EQ(manifest.at("start").get<std::string>().size(), std::string("2026-12-02T08:46:03.125Z").size());

  auto csv = lines_of(dir / "epochs.csv");
  ASSERT_EQ(csv.size(), 1u);
  EXPECT_EQ(csv[0], header());
  EXPECT_EQ(csv[0].rfind("epoch,step,lr,", 0), 0u) << csv[0];
  EXPECT_FALSE(fs::exists(dir / "epochs.jsonl"));
}

TEST(RunLog, AppendWritesOneJsonLineAndOneCsvRowPerRecord) {
  TempDir tmp;
  RunLog run = RunLog::create(make_spec(tmp), false);
  run.append(record(1));
  run.append(record(2));

  auto jsonl = lines_of(run.dir() / "epochs.jsonl");
  ASSERT_EQ(jsonl.size(), 2u);
  auto first = nlohmann::json::parse(jsonl[0]);
  auto second = nlohmann::json::parse(jsonl[1]);
  EXPECT_EQ(first.at("epoch"), 1);
  EXPECT_EQ(first.at("step"), 100);
  EXPECT_DOUBLE_EQ(first.at("test_acc").get<double>(), 0.875);
  EXPECT_EQ(first.at("replicas"), 2);
  EXPECT_EQ(first.at("global_batch"), 128);
  EXPECT_EQ(second.at("epoch"), 2);
  EXPECT_EQ(second.at("step"), 200);

  auto csv = lines_of(run.dir() / "epochs.csv");
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0], header());
  EXPECT_EQ(csv[1].rfind("1,100,0.05,0.5,0.75,0.25,0.875,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("2,200,", 0), 0u) << csv[2];
  // Same number of fields as columns.
  size_t commas = 0;
  for (char c : csv[1]) commas += c == ',' ? 1 : 0;
  EXPECT_EQ(commas + 1, EpochRecord::csv_columns().size());
  const auto columns = EpochRecord::csv_columns();
  const size_t batch_column = std::find(columns.begin(), columns.end(), "global_batch") - columns.begin();
  std::vector<std::string> fields;
  std::istringstream row(csv[1]);
  for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
  ASSERT_LT(batch_column, fields.size());
  EXPECT_EQ(fields[batch_column], "128");
}

TEST(RunLog, SecondCreateWithoutOverwriteThrowsNamingTheDirectory) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog run = RunLog::create(spec, false);
  run.append(record(1));
  try {
    RunLog::create(spec, false);
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(run.dir().string()), std::string::npos) << e.what();
  }
  // The old run is untouched.
  EXPECT_EQ(lines_of(run.dir() / "epochs.jsonl").size(), 1u);
}

TEST(RunLog, TheEffectiveSpecLeavesOutWhereAndHowARunIsWrittenLaunchedAndStopped) {
  TempDir tmp;
  const auto base = make_spec(tmp).resolved;
  auto other = base;
  other["output"] = "elsewhere";
  other["name"] = "renamed";
  other["log"]["every_steps"] = 7;
  other["checkpoint"]["every_epochs"] = 3;
  other["replicas"]["timeout_s"] = 11;
  other["replicas"]["max_restarts"] = 2;
  other["debug"] = {{"fault", {"stop", "crash"}}, {"rank", 1}, {"step", 5}, {"audits", "abort"}};
  EXPECT_EQ(effective_spec(other), effective_spec(base)) << effective_spec(other).dump();
}

TEST(RunLog, TheEffectiveSpecKeepsWhatShapesTheRecordsAndTheBugsOfDebugFault) {
  TempDir tmp;
  const auto base = make_spec(tmp).resolved;
  for (const auto& [pointer, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"/epochs", 9},
                                                           {"/optimizer/lr", 0.5},
                                                           {"/replicas/count", 2},
                                                           {"/dataset/root", "/x"},
                                                           {"/debug/fault", "update_first_only"},
                                                           {"/debug/audits", "warn"}}) {
    auto other = base;
    other[nlohmann::json::json_pointer(pointer)] = value;
    EXPECT_NE(effective_spec(other), effective_spec(base)) << pointer;
  }
  auto a = base, b = base;
  a["debug"]["fault"] = {"one_sided_sigmoid_loss", "stop", "update_first_only"};
  b["debug"]["fault"] = {"update_first_only", "one_sided_sigmoid_loss"};
  EXPECT_EQ(effective_spec(a), effective_spec(b)) << "the bugs are a set; stop is no bug";
}

TEST(RunLog, SpecChangesListEachChangedKeyOldToNew) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  EXPECT_TRUE(spec_changes(run_dir(spec), spec).empty()) << "no run there yet";
  RunLog::create(spec, false).append(record(1));
  EXPECT_TRUE(spec_changes(run_dir(spec), spec).empty());
  auto changed = spec;
  changed.resolved["epochs"] = 7;
  changed.resolved["log"]["every_steps"] = 3;
  const auto changes = spec_changes(run_dir(spec), changed);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], fmt::format("/epochs: {} -> 7", spec.resolved["epochs"].dump()));
  const std::string message = error_of([&] { RunLog::create(changed, false); });
  EXPECT_NE(message.find("a different spec (/epochs: "), std::string::npos) << message;
}

// A run written before a field existed ran as that field's default (dataset.order aside: its
// default is not what came before it): no change, unless the new spec sets it otherwise.
TEST(RunLog, SpecChangesTakeAFieldTheOldSpecLacksAsItsDefault) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog::create(spec, false).append(record(1));
  auto old = nlohmann::json::parse(ddplab::testing::read_file(spec_file(run_dir(spec))));
  old["replicas"].erase("prewarm_steps");
  ddplab::testing::write_file(spec_file(run_dir(spec)), old.dump());
  EXPECT_TRUE(spec_changes(run_dir(spec), spec).empty());
  auto changed = spec;
  changed.resolved["replicas"]["prewarm_steps"] = 2;
  EXPECT_EQ(spec_changes(run_dir(spec), changed), std::vector<std::string>{"/replicas/prewarm_steps: 0 -> 2"});
  old["dataset"].erase("order");  // before it existed every run drew its order as torch_sampler does
  ddplab::testing::write_file(spec_file(run_dir(spec)), old.dump());
  EXPECT_EQ(spec_changes(run_dir(spec), spec),
            std::vector<std::string>{R"(/dataset/order: "torch_sampler" -> "independent")"});
}

TEST(RunLog, CreateWithOverwriteEmptiesTheDirectory) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog run = RunLog::create(spec, false);
  run.append(record(1));
  ddplab::testing::write_file(run.dir() / "rank-1.log", "old\n");
  RunLog again = RunLog::create(spec, true);
  EXPECT_EQ(again.dir(), run.dir());
  EXPECT_FALSE(fs::exists(again.dir() / "epochs.jsonl"));
  EXPECT_FALSE(fs::exists(again.dir() / "rank-1.log"));
  EXPECT_EQ(lines_of(again.dir() / "epochs.csv"), std::vector<std::string>{header()});
  EXPECT_EQ(read_json(again.dir() / "manifest.json").at("status"), "running");
  EXPECT_TRUE(fs::exists(again.dir() / "spec.json"));
}

TEST(RunLog, ReusingADirectoryWithoutRecordsWritesOneCsvHeader) {
  TempDir tmp;
  auto spec = make_spec(tmp);
  RunLog::create(spec, false);  // e.g. a run that failed before its first epoch
  RunLog again = RunLog::create(spec, false);
  EXPECT_EQ(lines_of(again.dir() / "epochs.csv"), std::vector<std::string>{header()});
  again.append(record(1));
  EXPECT_EQ(lines_of(again.dir() / "epochs.csv").size(), 2u);
}

TEST(RunLog, FinishSetsStatusEndAndMessage) {
  TempDir tmp;
  RunLog run = RunLog::create(make_spec(tmp), false);
  run.finish(RunStatus::kFailed, "rank 1 crashed");
  auto manifest = read_json(run.dir() / "manifest.json");
  EXPECT_EQ(manifest.at("status"), "failed");
  ASSERT_TRUE(manifest.at("end").is_string());
  EXPECT_EQ(manifest.at("end").get<std::string>().back(), 'Z');
  EXPECT_EQ(manifest.at("message"), "rank 1 crashed");
  EXPECT_FALSE(manifest.at("libtorch").get<std::string>().empty());  // the rest is kept
}

TEST(RunLog, FinishWithoutMessageAddsNoMessage) {
  TempDir tmp;
  RunLog run = RunLog::create(make_spec(tmp), false);
  run.finish(RunStatus::kDone);
  auto manifest = read_json(run.dir() / "manifest.json");
  EXPECT_EQ(manifest.at("status"), "done");
  EXPECT_FALSE(manifest.contains("message"));
}

TEST(RunLog, OpenExistingAndRefuseNonRunDirectory) {
  TempDir tmp;
  RunLog run = RunLog::create(make_spec(tmp), false);
  RunLog opened = RunLog::open(run.dir());
  opened.append(record(3));
  EXPECT_EQ(lines_of(run.dir() / "epochs.jsonl").size(), 1u);
  EXPECT_THROW(RunLog::open(tmp.path()), Error);
}

TEST(RunLog, WriteFileAtomicReplacesAndLeavesNoTempFile) {
  TempDir tmp;
  fs::path file = tmp.path() / "x.json";
  write_file_atomic(file, "first");
  write_file_atomic(file, "second");
  EXPECT_EQ(read_file(file), "second");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"x.json"});
}

TEST(RunLog, WriteFileAtomicIntoMissingDirectoryThrowsError) {
  TempDir tmp;
  EXPECT_THROW(write_file_atomic(tmp.path() / "no" / "x.json", "a"), Error);
}

TEST(RunLog, AppendLineAppendsWholeLines) {
  TempDir tmp;
  fs::path file = tmp.path() / "a.txt";
  append_line(file, "one");
  append_line(file, "two");
  EXPECT_EQ(read_file(file), "one\ntwo\n");
}

TEST(RunLog, AppendLineToUnwritablePathThrowsErrorNamingTheFile) {
  TempDir tmp;
  // A missing parent directory cannot be written even by root.
  fs::path file = tmp.path() / "missing-dir" / "epochs.jsonl";
  try {
    append_line(file, "x");
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

// The disk fills up in the middle of a write (testing::FileSizeLimit).
TEST(RunLog, AppendThatDoesNotFitLeavesNoPartialLine) {
  TempDir tmp;
  fs::path file = tmp.path() / "epochs.jsonl";
  append_line(file, R"({"epoch":1})");
  const std::string before = read_file(file);
  std::string msg;
  {
    FileSizeLimit limit(before.size() + 10);  // room for 10 bytes of the next line
    msg = error_of([&] { append_line(file, std::string(100, 'x')); });
  }
  EXPECT_NE(msg.find(file.string() + ": write failed: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("left as it was"), std::string::npos) << msg;
  EXPECT_EQ(read_file(file), before) << "the 10 bytes that fitted were cut off again";
  append_line(file, R"({"epoch":2})");
  EXPECT_EQ(read_file(file), before + "{\"epoch\":2}\n") << "the file takes lines again once there is room";
}

TEST(RunLog, AtomicWriteThatDoesNotFitKeepsThePreviousVersion) {
  TempDir tmp;
  fs::path file = tmp.path() / "manifest.json";
  write_file_atomic(file, "{\"status\": \"running\"}\n");
  std::string msg;
  {
    FileSizeLimit limit(16);
    msg = error_of([&] { write_file_atomic(file, std::string(1000, ' ') + "{}"); });
  }
  EXPECT_NE(msg.find(file.string() + ": write failed: "), std::string::npos) << msg;
  EXPECT_EQ(read_file(file), "{\"status\": \"running\"}\n");
  for (const auto& entry : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(entry.path().filename(), "manifest.json") << "no temp file is left behind";
}

TEST(RunLog, ReadJsonErrorsNameTheFile) {
  TempDir tmp;
  fs::path bad = tmp.path() / "bad.json";
  ddplab::testing::write_file(bad, "{not json");
  try {
    read_json(bad);
    FAIL() << "expected ddplab::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_json(tmp.path() / "absent.json"), Error);
}

TEST(RunLog, ReadJsonErrorsCarryNoParserIds) {
  TempDir tmp;
  fs::path bad = tmp.path() / "torn.json";
  ddplab::testing::write_file(bad, "{\"status\": \"run");
  std::string msg;
  try {
    read_json(bad);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg.rfind(bad.string() + ": malformed JSON: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
}

// A manifest edited or torn by hand is an error naming the file, not a JSON library exception
// (which the CLI would report as a runtime failure).
TEST(RunLog, ManifestThatIsNotAnObjectWithAStringStatusIsAnErrorNamingIt) {
  TempDir tmp;
  for (const char* text : {"[1]", "{\"status\": 5}", "{\"status\": null}", "\"done\"", "{\"checkpoint\": 3}"}) {
    ddplab::testing::write_file(tmp.path() / "manifest.json", text);
    std::string msg;
    try {
      read_manifest(tmp.path());
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_EQ(msg.rfind((tmp.path() / "manifest.json").string() + ": not a ddplab manifest", 0), 0u)
        << text << ": " << msg;
  }
  ddplab::testing::write_file(tmp.path() / "manifest.json", "{\"status\": \"done\", \"checkpoint\": {}}");
  EXPECT_EQ(read_manifest(tmp.path())["status"], "done");
}

TEST(CheckpointMark, RoundTripsThroughTheManifestAndIsAbsentWithoutOne) {
  const CheckpointMark mark{2, 17, 145, 2, "2026-12-04T23:00:00Z"};
  const auto back = CheckpointMark::of(nlohmann::json{{"status", "interrupted"}, {"checkpoint", mark.to_json()}});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->epochs_done, 2);
  EXPECT_EQ(back->step_in_epoch, 17);
  EXPECT_EQ(back->global_step, 145);
  EXPECT_EQ(back->records, 2);
  EXPECT_EQ(back->time, mark.time);
  EXPECT_FALSE(CheckpointMark::of(nlohmann::json{{"status", "running"}}).has_value());
}

}  // namespace
}  // namespace ddplab::rundir
