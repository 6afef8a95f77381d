// The spec's "slurm" section and the same options from the command line (config/slurm.h).
#include "ddplab/config/slurm.h"

#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"

namespace ddplab::config {
namespace {

using json = nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmOptions, TheSectionIsReadAndAnAbsentOneSetsNothing) {
  const auto o = slurm_options(json{{"slurm",
                                     {{"partition", "gpu"},
                                      {"time", "1-12:30:00"},
                                      {"account", "p42"},
                                      {"options", {"--qos=high", "--exclusive"}}}}});
  EXPECT_EQ(o.partition, "gpu");
  EXPECT_EQ(o.time, "1-12:30:00");
  EXPECT_EQ(o.account, "p42");
  EXPECT_EQ(o.options, (std::vector<std::string>{"--qos=high", "--exclusive"}));
  EXPECT_EQ(slurm_options(json{{"name", "x"}}), SlurmOptions{});
}

TEST(SlurmOptions, EveryTimeFormatOfSbatchIsAcceptedAndOthersNamed) {
  for (const char* t : {"90", "90:30", "2:00:00", "1-12", "1-12:30", "1-12:30:59", "UNLIMITED", "0"}) {
    SlurmOptions o;
    o.time = t;
    EXPECT_NO_THROW(check_slurm_options(o, SlurmNames::kSpec)) << t;
  }
  for (const char* t : {"2h", "1:60", "1:2:3:4", "-1", "1-", "1 :00", "1.5"}) {
    SlurmOptions o;
    o.time = t;
    const std::string msg = error_of([&] { check_slurm_options(o, SlurmNames::kSpec); });
    EXPECT_EQ(msg.rfind("/slurm/time: expected a SLURM time limit", 0), 0u) << t << ": " << msg;
    EXPECT_NE(msg.find(std::string("got \"") + t + "\""), std::string::npos) << msg;
  }
}

TEST(SlurmOptions, ABadValueInASpecIsAnErrorOfResolveAtItsPointer) {
  json doc{{"name", "x"}, {"slurm", {{"options", {"--qos=high", "--ntasks=4"}}}}};
  std::string msg = error_of([&] { resolve(doc); });
  EXPECT_EQ(msg.rfind("/slurm/options/1: \"--ntasks=4\" is not allowed here: ddplab asks for one task per replica", 0),
            0u)
      << msg;
  doc["slurm"] = {{"partition", "gpu a100"}};
  msg = error_of([&] { resolve(doc); });
  EXPECT_EQ(msg.rfind("/slurm/partition: expected a SLURM partition name without spaces", 0), 0u) << msg;
  doc["slurm"] = {{"queue", "gpu"}};
  EXPECT_NE(error_of([&] { resolve(doc); }).find("/slurm/queue"), std::string::npos) << "an unknown key";
  doc["slurm"] = {{"time", "4:00:00"}};
  EXPECT_EQ(resolve(doc).resolved["slurm"]["time"], "4:00:00");
}

TEST(SlurmOptions, OptionsDdplabSetsOrThatHaveAFieldAreRefusedInEverySpelling) {
  for (const char* opt : {"--ntasks=2",
                          "-n2",
                          "-n",
                          "--cpus-per-task=4",
                          "-c4",
                          "--gpus-per-task=2",
                          "--job-name=x",
                          "-Jx",
                          "--output=o",
                          "-o",
                          "--error=e",
                          "--dependency=afterok:1",
                          "-d",
                          "--parsable",
                          "--wrap=hostname",
                          "--partition=gpu",
                          "-pgpu",
                          "--time=10",
                          "-t10",
                          "--account=a",
                          "-Aa",
                          "--open-mode=truncate"}) {
    SlurmOptions o;
    o.options = {opt};
    const std::string msg = error_of([&] { check_slurm_options(o, SlurmNames::kCommandLine); });
    EXPECT_EQ(msg.rfind(fmt::format("--sbatch-option \"{}\": \"{}\" is not allowed here", opt, opt), 0), 0u) << msg;
  }
  SlurmOptions o;
  o.options = {"--qos=high", "--exclusive", "-N1", "--nodes=2", "--mem=4G", "--constraint=a100", "--hold"};
  EXPECT_NO_THROW(check_slurm_options(o, SlurmNames::kCommandLine));
}

TEST(SlurmOptions, AnOptionIsOneArgumentStartingWithADash) {
  SlurmOptions o;
  o.options = {"high"};
  EXPECT_NE(error_of([&] {
              check_slurm_options(o, SlurmNames::kSpec);
            }).find("/slurm/options/0: expected an sbatch option starting with '-'"),
            std::string::npos);
  o.options = {"--qos high"};
  EXPECT_NE(error_of([&] { check_slurm_options(o, SlurmNames::kSpec); }).find("(\"--qos=high\", not \"--qos high\")"),
            std::string::npos);
}

TEST(SlurmOptions, TheCommandLineReplacesSetFieldsAndAddsOptions) {
  SlurmOptions spec{"cpu", "10", "p1", {"--qos=low"}};
  SlurmOptions cli;
  cli.time = "20";
  cli.options = {"--hold"};
  const auto m = merged(spec, cli);
  EXPECT_EQ(m.partition, "cpu");
  EXPECT_EQ(m.time, "20");
  EXPECT_EQ(m.account, "p1");
  EXPECT_EQ(m.options, (std::vector<std::string>{"--qos=low", "--hold"}));
}

}  // namespace
}  // namespace ddplab::config
