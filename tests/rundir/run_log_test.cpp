#include "ddplab/rundir/run_log.h"

#include <gtest/gtest.h>

#include <sstream>

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
  EXPECT_EQ(manifest.at("start").get<std::string>().size(), std::string("2026-12-02T08:46:03Z").size());

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
  EXPECT_EQ(csv[1].substr(csv[1].rfind(',') + 1), "128");
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

}  // namespace
}  // namespace ddplab::rundir
