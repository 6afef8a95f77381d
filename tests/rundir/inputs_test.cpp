// A run's identity by content (rundir/inputs.h): the files its spec names are hashed into its
// manifest, and a replaced one is a change like a changed spec field.
#include "ddplab/rundir/inputs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/base/sha256.h"
#include "ddplab/rundir/run_log.h"
#include "test_util.h"

namespace ddplab::rundir {
namespace {

namespace fs = std::filesystem;
using ddplab::testing::error_of;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;

struct ScriptRun {
  TempDir tmp;
  fs::path module = tmp.path() / "my_net.pt";
  config::ExperimentSpec spec;

  ScriptRun() {
    write_file(module, "a TorchScript archive of one architecture");
    spec = config::resolve(
        nlohmann::json{{"name", "ts"}, {"output", tmp.str("runs")}, {"model", {{"torchscript", module.string()}}}});
  }
  // A run with one epoch record, left failed with a checkpoint: RunLog::resume continues it.
  RunLog unfinished() const {
    RunLog run = RunLog::create(spec, false);
    EpochRecord r;
    r.epoch = 1;
    run.append(r);
    write_file_atomic(checkpoint_file(run.dir()), "not read here");
    run.update_manifest({{"status", "failed"}, {"checkpoint", {{"records", 1}, {"epochs_done", 1}}}});
    return run;
  }
};

// The newcomer's case: my_net.pt overwritten with another architecture, the same spec run again.
TEST(RunInputs, AReplacedTorchScriptFileIsAChangeNamingTheFileAndBothHashes) {
  ScriptRun t;
  const RunLog run = RunLog::create(t.spec, false);
  run.append(EpochRecord{});
  run.finish(RunStatus::kDone);
  const std::string before = sha256_file(t.module);
  EXPECT_EQ(read_manifest(run.dir())["inputs"][t.module.string()], before);
  EXPECT_TRUE(spec_changes(run.dir(), t.spec).empty()) << "the same file: the run is reused";

  write_file(t.module, "a TorchScript archive of another architecture");
  const std::string after = sha256_file(t.module);
  const std::string line = fmt::format("{}: content changed, sha256 {} -> {}", t.module.string(), before, after);
  EXPECT_EQ(spec_changes(run.dir(), t.spec), std::vector<std::string>{line});
  const std::string message = error_of([&] { RunLog::create(t.spec, false); });
  EXPECT_NE(message.find(line), std::string::npos) << message;
}

TEST(RunInputs, AnUnchangedTorchScriptFileResumesAReplacedOneIsRefused) {
  ScriptRun t;
  t.unfinished();
  EXPECT_TRUE(RunLog::resume(t.spec, "again").has_value());

  ScriptRun replaced;
  replaced.unfinished();
  const std::string before = sha256_file(replaced.module);
  write_file(replaced.module, "another module");
  const std::string message = error_of([&] { RunLog::resume(replaced.spec, "again"); });
  EXPECT_NE(message.find("holds an unfinished run of a different spec"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("{}: content changed, sha256 {} -> {}", replaced.module.string(), before,
                                     sha256_hex("another module"))),
            std::string::npos)
      << message;
}

// Run directories written before the inputs were recorded are compared by their spec alone.
TEST(RunInputs, AManifestWithoutInputsIsNotCompared) {
  ScriptRun t;
  const RunLog run = RunLog::create(t.spec, false);
  auto manifest = read_manifest(run.dir());
  manifest.erase("inputs");
  write_file_atomic(manifest_file(run.dir()), manifest.dump());
  write_file(t.module, "another module");
  EXPECT_TRUE(spec_changes(run.dir(), t.spec).empty());
}

TEST(RunInputs, ChangesListEveryChangedPathAndAFileNotReadBefore) {
  const nlohmann::json recorded = {{"a", "1"}, {"b", "2"}, {"gone", "3"}};
  const nlohmann::json now = {{"a", "1"}, {"b", "9"}, {"new", "4"}};
  EXPECT_EQ(input_changes(recorded, now), (std::vector<std::string>{"b: content changed, sha256 2 -> 9",
                                                                    "new: content changed, sha256 (not read) -> 4"}));
}

}  // namespace
}  // namespace ddplab::rundir
