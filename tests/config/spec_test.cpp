#include "ddplab/config/spec.h"

#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "ddplab/base/error.h"
#include "ddplab/base/version.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/spec_error.h"
#include "ddplab/data/dataset.h"
#include "test_util.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// Resolves `doc` and returns the Error message, or "" when it resolved.
std::string resolve_error(const json& doc) {
  try {
    resolve(doc);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Loads the spec file at `path` and returns the Error message, or "" when it loaded.
std::string load_error(const std::string& path) {
  try {
    load_json_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json minimal() { return json{{"name", "exp"}}; }

json with(const std::string& assignment) {
  json doc = minimal();
  apply_override(doc, assignment);
  return doc;
}

TEST(Spec, DefaultsAreFilled) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_EQ(s.name, "exp");
  EXPECT_STREQ(config::name(s.dataset.name), "fashion-mnist");
  EXPECT_EQ(s.dataset.root, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(s.model.name, "mnist_cnn");
  EXPECT_DOUBLE_EQ(s.model.dropout, 0.5);
  EXPECT_STREQ(config::name(s.optimizer.name), "sgd");
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.01);
  EXPECT_DOUBLE_EQ(s.optimizer.beta2, 0.999);
  EXPECT_STREQ(config::name(s.schedule.decay), "constant");
  EXPECT_TRUE(s.schedule.milestones.empty());
  EXPECT_EQ(s.per_replica_batch, 64);
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.replicas.count, 1);
  EXPECT_STREQ(config::name(s.replicas.backend), "gloo");
  EXPECT_EQ(s.epochs, 1);
  EXPECT_EQ(s.output, "runs");
  EXPECT_TRUE(s.debug.faults.empty());
  EXPECT_EQ(s.debug.audits, AuditMode::kAbort) << "a failed audit stops the run unless asked otherwise";
  EXPECT_EQ(s.resolved["debug"]["audits"], "abort");
  EXPECT_EQ(s.resolved["debug"]["fault"], "none");
  // The resolved JSON names every setting.
  EXPECT_EQ(s.resolved["optimizer"]["momentum"], 0.9);
  EXPECT_EQ(s.resolved["batch"], json({{"per_replica", 64}, {"accumulate_steps", 1}}));
  EXPECT_EQ(s.resolved["dataset"]["root"], "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(s.resolved["schedule"]["base_batch"], 64);
}

TEST(Spec, PartialSectionKeepsUserValuesAndFillsTheRest) {
  json doc = minimal();
  doc["optimizer"] = {{"lr", 0.1}};
  ExperimentSpec s = resolve(doc);
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.1);
  EXPECT_DOUBLE_EQ(s.optimizer.momentum, 0.9);
}

TEST(Spec, MnistRootDefault) {
  ExperimentSpec s = resolve(with("dataset.name=mnist"));
  EXPECT_EQ(s.dataset.root, "data/mnist");
  EXPECT_EQ(s.resolved["dataset"]["root"], "data/mnist");
}

TEST(Spec, AnEmptyRootResolvesToTheDatasetsDefault) {
  for (const char* name : {"fashion-mnist", "mnist", "cifar10", "cifar100"}) {
    ExperimentSpec s = resolve(with(std::string("dataset.name=") + name));
    EXPECT_EQ(s.dataset.root, default_root(parse_setting<DatasetName>(name, "/dataset/name"))) << name;
    EXPECT_EQ(s.resolved["dataset"]["root"], s.dataset.root) << name;
    EXPECT_FALSE(s.dataset.root.empty()) << name;
  }
}

TEST(Spec, CifarFieldsAndDefaults) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_STREQ(config::name(s.dataset.augment), "none");
  EXPECT_FALSE(s.model.sync_bn);
  EXPECT_TRUE(s.optimizer.weight_decay_groups.empty());
  EXPECT_EQ(s.resolved["optimizer"]["weight_decay_groups"], json::array());
  json doc = with("dataset.name=cifar10");
  apply_override(doc, "dataset.augment=tf_tutorial");
  apply_override(doc, "model.name=resnet20");
  apply_override(doc, "model.sync_bn=true");
  apply_override(
      doc,
      R"(optimizer.weight_decay_groups=[{"match":"^fc[12]\\.weight$","weight_decay":0.004},{"match":"bn","weight_decay":0}])");
  s = resolve(doc);
  EXPECT_STREQ(config::name(s.dataset.augment), "tf_tutorial");
  EXPECT_EQ(s.model.name, "resnet20");
  EXPECT_TRUE(s.model.sync_bn);
  ASSERT_EQ(s.optimizer.weight_decay_groups.size(), 2u);
  EXPECT_EQ(s.optimizer.weight_decay_groups[0].match, "^fc[12]\\.weight$");
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay_groups[0].weight_decay, 0.004);
  EXPECT_EQ(s.optimizer.weight_decay_groups[1].match, "bn");
  EXPECT_EQ(resolve_error(with("dataset.augment=autoaugment")),
            "/dataset/augment: must be one of \"none\", \"standard\", \"tf_tutorial\", got \"autoaugment\"");
}

TEST(Spec, BatchesOnTheDeviceTakeOnlyPointwiseAugmentation) {
  EXPECT_EQ(resolve(minimal()).dataset.placement, DataPlacement::kAuto);
  json doc = with("dataset.placement=device");
  apply_override(doc, "dataset.augment=standard");
  EXPECT_EQ(resolve(doc).dataset.placement, DataPlacement::kDevice);
  apply_override(doc, "dataset.augment=tf_tutorial");
  EXPECT_EQ(resolve_error(doc),
            "/dataset/placement: batches made on the device take dataset.augment \"none\" or \"standard\" "
            "(tf_tutorial's brightness, contrast and per-image standardization are made on the host); use "
            "\"host\" or \"auto\", got \"device\" with augment \"tf_tutorial\"");
  apply_override(doc, "dataset.placement=auto");
  EXPECT_EQ(resolve(doc).dataset.placement, DataPlacement::kAuto) << "auto makes tf_tutorial's batches on the host";
}

TEST(Spec, WeightDecayGroupErrorsNameTheEntry) {
  EXPECT_EQ(resolve_error(with(R"(optimizer.weight_decay_groups=[{"match":"fc","weight_decay":-1}])")),
            "/optimizer/weight_decay_groups/0/weight_decay: must be >= 0, got -1");
  EXPECT_EQ(resolve_error(with(R"(optimizer.weight_decay_groups=[{"match":"fc"}])")),
            "/optimizer/weight_decay_groups/0/weight_decay: is required");
  EXPECT_EQ(resolve_error(with(R"(optimizer.weight_decay_groups=[{"match":"fc","weight_decay":0,"weight_decy":1}])")),
            "/optimizer/weight_decay_groups/0/weight_decy: unknown key; did you mean \"weight_decay\"?");
  std::string msg = resolve_error(
      with(R"(optimizer.weight_decay_groups=[{"match":"fc","weight_decay":0},{"match":"fc[12","weight_decay":0}])"));
  EXPECT_EQ(msg.rfind("/optimizer/weight_decay_groups/1/match: must be a valid regular expression (", 0), 0u) << msg;
  EXPECT_NE(msg.find("got \"fc[12\""), std::string::npos) << msg;
}

TEST(Spec, SchemaFieldsAreDocumented) {
  const std::string doc = ddplab::testing::read_file(std::string(DDPLAB_SOURCE_DIR) + "/docs/spec.md");
  ASSERT_FALSE(doc.empty());
  json schema = json::parse(schema_text());
  std::function<void(const json&, const std::string&)> walk = [&](const json& node, const std::string& path) {
    if (node.contains("items") && node["items"].is_object()) walk(node["items"], path + "[]");
    if (!node.contains("properties")) return;
    for (const auto& [key, sub] : node["properties"].items()) {
      EXPECT_NE(doc.find("`" + key + "`"), std::string::npos) << path + "/" + key << " is not in docs/spec.md";
      walk(sub, path + "/" + key);
    }
  };
  walk(schema, "");
}

TEST(Spec, OverrideNumberBoolStringListObject) {
  json doc = minimal();
  apply_override(doc, "optimizer.lr=0.5");
  apply_override(doc, "optimizer.nesterov=true");
  apply_override(doc, "optimizer.name=adam");
  apply_override(doc, "schedule.milestones=[10,20]");
  apply_override(doc, "epochs=3");
  EXPECT_TRUE(doc["optimizer"]["lr"].is_number_float());
  EXPECT_TRUE(doc["optimizer"]["nesterov"].is_boolean());
  EXPECT_EQ(doc["optimizer"]["name"], "adam");
  ExperimentSpec s = resolve(doc);
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.5);
  EXPECT_TRUE(s.optimizer.nesterov);
  EXPECT_STREQ(config::name(s.optimizer.name), "adam");
  EXPECT_EQ(s.schedule.milestones, (std::vector<double>{10, 20}));
  EXPECT_EQ(s.epochs, 3);
}

TEST(Spec, OverrideObjectReplacesWholeSection) {
  json doc = minimal();
  doc["batch"] = {{"per_replica", 32}};
  apply_override(doc, "replicas.count=4");
  apply_override(doc, R"(batch={"global":64})");
  EXPECT_EQ(doc["batch"], json({{"global", 64}}));
  ExperimentSpec s = resolve(doc);
  EXPECT_EQ(s.per_replica_batch, 16);
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.resolved["batch"], json({{"global", 64}, {"accumulate_steps", 1}}));
}

TEST(Spec, OverrideCreatesIntermediateObjectsAndStringFallback) {
  json doc = json::object();
  apply_override(doc, "a.b.c=hello world");
  EXPECT_EQ(doc["a"]["b"]["c"], "hello world");
  apply_override(doc, "a.d=");
  EXPECT_EQ(doc["a"]["d"], "");
}

TEST(Spec, MalformedOverrideNamesTheAssignment) {
  json doc = minimal();
  try {
    apply_override(doc, "epochs");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"epochs\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply_override(doc, "=3"), Error);
  EXPECT_THROW(apply_override(doc, "a..b=3"), Error);
  try {
    apply_override(doc, "name.x=3");  // name is a string
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("name.x=3"), std::string::npos) << e.what();
  }
}

TEST(Spec, MissingFileIsNamed) {
  testing::TempDir dir;
  std::string path = dir.str("absent.json");
  EXPECT_EQ(load_error(path), path + ": no such spec file");
}

TEST(Spec, MalformedJsonGivesLineAndColumn) {
  testing::TempDir dir;
  std::string path = dir.str("bad.json");
  testing::write_file(path, "{\n  \"name\": \"x\",\n  \"epochs\": ,\n}\n");
  const std::string msg = load_error(path);
  EXPECT_EQ(msg.rfind(path + ":3:13: malformed JSON: ", 0), 0u) << msg;
}

TEST(Spec, DirectoryOrNulByteIsNamedNotMalformedJson) {
  testing::TempDir dir;
  EXPECT_NE(load_error(dir.str("")).find("is a directory, not a spec file"), std::string::npos)
      << load_error(dir.str(""));
  // nlohmann stops at a NUL as at the end of the text: the rest would be silently dropped.
  std::string path = dir.str("nul.json");
  testing::write_file(path, std::string("{\"name\": \"a\"}\0{\"epochs\": 9}", 28));
  EXPECT_EQ(load_error(path), path + ": a NUL byte at offset 13; a JSON text holds none");
}

// JSON parsers keep the last of two equal keys; in a spec the first would be silently ignored.
TEST(Spec, AKeyGivenTwiceInOneObjectIsAnError) {
  testing::TempDir dir;
  std::string path = dir.str("twice.json");
  testing::write_file(path, R"({"name": "x", "optimizer": {"lr": 0.1, "momentum": 0.9, "lr": 0.2}})");
  EXPECT_EQ(load_error(path), path +
                                  ": key \"lr\" appears twice in the object at /optimizer; JSON keeps only the "
                                  "last, so the first would be silently ignored");
  testing::write_file(path, R"({"name": "x", "optimizer": {"weight_decay_groups": [{"match": "a", "match": "b"}]}})");
  EXPECT_NE(load_error(path).find("key \"match\" appears twice in the object under /optimizer/weight_decay_groups"),
            std::string::npos)
      << load_error(path);
  // The same key in sibling objects is fine.
  testing::write_file(path, R"({"name": "x", "sweep": {"epochs": [1]}, "sweep_zip": {"epochs": [2]}})");
  EXPECT_EQ(load_error(path), "");
  json doc = minimal();
  try {
    apply_override(doc, R"(optimizer={"lr": 1, "lr": 2})");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key \"lr\" appears twice"), std::string::npos) << e.what();
  }
}

TEST(Spec, OversizedSpecFileIsRefusedWithoutReadingItAll) {
  testing::TempDir dir;
  std::string path = dir.str("big.json");
  testing::write_file(path, std::string((16 << 20) + 10, ' '));
  EXPECT_EQ(load_error(path), path + ": larger than 16 MiB; not a spec file");
}

TEST(Spec, LoadAppliesOverridesInOrder) {
  testing::TempDir dir;
  std::string path = dir.str("exp.json");
  testing::write_file(path, R"({"name": "exp", "epochs": 2})");
  ExperimentSpec s = load(path, {"epochs=5", "epochs=7", "seed=9"});
  EXPECT_EQ(s.epochs, 7);
  EXPECT_EQ(s.seed, 9);
}

TEST(Spec, UnknownKeySuggestsClosest) {
  json doc = minimal();
  doc["optimiser"] = json::object();
  EXPECT_EQ(resolve_error(doc), "/optimiser: unknown key; did you mean \"optimizer\"?");
  EXPECT_EQ(resolve_error(with("optimizer.momentun=0.5")),
            "/optimizer/momentun: unknown key; did you mean \"momentum\"?");
}

// A value mistyped as a near neighbour of a listed one gets the same hint as a key; a short value
// far from every option (an edit per 3 characters allowed) gets the list alone.
TEST(Spec, MistypedValueSuggestsClosest) {
  json doc = minimal();
  doc["model"] = {{"layers", json::array({{{"type", "conv"}, {"channels", 8}, {"kernel", 3}},
                                          {{"type", "rellu"}},
                                          {{"type", "flatten"}},
                                          {{"type", "linear"}, {"features", 10}}})}};
  const std::string layer = resolve_error(doc);
  EXPECT_EQ(layer.rfind("/model/layers/1/type: must be one of \"conv\"", 0), 0u) << layer;
  EXPECT_NE(layer.find(R"(got "rellu"; did you mean "relu"?)"), std::string::npos) << layer;
  EXPECT_EQ(resolve_error(with("dataset.augment=standrd")),
            "/dataset/augment: must be one of \"none\", \"standard\", \"tf_tutorial\", got \"standrd\"; did you mean "
            "\"standard\"?");
  EXPECT_EQ(resolve_error(with("replicas.reduce=avg")),
            "/replicas/reduce: must be one of \"mean\", \"sum\", got \"avg\"");
}

TEST(Spec, UnknownKeyWithoutNearMatchListsAllowed) {
  std::string msg = resolve_error(with("replicas.zzzzzzzz=1"));
  EXPECT_EQ(msg.rfind("/replicas/zzzzzzzz: unknown key; allowed keys: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("bucket_mb"), std::string::npos) << msg;
}

TEST(Spec, WrongType) {
  EXPECT_EQ(resolve_error(with("epochs=ten")), "/epochs: must be an integer, got \"ten\"");
  EXPECT_EQ(resolve_error(with("optimizer.nesterov=1")), "/optimizer/nesterov: must be a boolean, got 1");
  EXPECT_EQ(resolve_error(with("optimizer=3")), "/optimizer: must be an object, got 3");
}

// JSON Schema: a number with no fractional part is an integer (64.0, 1e2), as Python's json writes them.
TEST(Spec, IntegralFloatsAreIntegers) {
  ExperimentSpec s = resolve(json::parse(R"({"name": "x", "epochs": 1e1, "seed": 3.0, "batch": {"per_replica": 64.0},
                                             "replicas": {"count": 2.0}})"));
  EXPECT_EQ(s.epochs, 10);
  EXPECT_EQ(s.seed, 3);
  EXPECT_EQ(s.per_replica_batch, 64);
  EXPECT_EQ(s.replicas.count, 2);
  EXPECT_TRUE(s.resolved["epochs"].is_number_integer()) << "spec.json records them as integers";
  EXPECT_EQ(resolve_error(with("epochs=1.5")), "/epochs: must be an integer, got 1.5");
  EXPECT_EQ(resolve(with("optimizer.lr=1.0")).resolved["optimizer"]["lr"].dump(), "1.0") << "numbers stay numbers";
}

// A fault aimed at a rank that does not exist would silently never happen (debug.rank is 1 by default).
TEST(Spec, FaultRankMustBeARankOfTheRun) {
  EXPECT_EQ(resolve_error(with("debug.fault=stop")),
            "/debug/rank: must be < replicas.count (1) for fault \"stop\" (its default is 1), got 1");
  json doc = with("debug.fault=crash");
  apply_override(doc, "replicas.count=2");
  EXPECT_EQ(resolve_error(doc), "");
  apply_override(doc, "replicas.mode=simulated");
  EXPECT_NE(resolve_error(doc).find("simulated replicas run in one process"), std::string::npos) << resolve_error(doc);
  EXPECT_EQ(resolve_error(with("debug.fault=update_first_only")), "") << "a fault of every rank";
}

// debug.fault takes one name (as before) or an array of names, so several bugs run together.
TEST(Spec, FaultIsOneNameOrAnArrayOfNames) {
  const ExperimentSpec one = resolve(with("debug.fault=one_sided_sigmoid_loss"));
  EXPECT_EQ(one.debug.faults, std::vector<Fault>{Fault::kOneSidedSigmoidLoss});
  EXPECT_EQ(one.resolved["debug"]["fault"], "one_sided_sigmoid_loss") << "spec.json keeps the form given";
  const ExperimentSpec three =
      resolve(with(R"(debug.fault=["update_first_only","one_sided_sigmoid_loss","eval_first_half"])"));
  EXPECT_EQ(three.debug.faults,
            (std::vector<Fault>{Fault::kUpdateFirstOnly, Fault::kOneSidedSigmoidLoss, Fault::kEvalFirstHalf}));
  EXPECT_TRUE(three.debug.has(Fault::kEvalFirstHalf));
  EXPECT_FALSE(three.debug.has(Fault::kSkipBroadcast));
  EXPECT_TRUE(resolve(with("debug.fault=none")).debug.faults.empty());
  EXPECT_EQ(resolve(with("debug.audits=warn")).debug.audits, AuditMode::kWarn);
}

TEST(Spec, BadFaultsAndAuditModesAreNamed) {
  EXPECT_EQ(resolve_error(with("debug.fault=eval_half")),
            "/debug/fault: must be one of \"none\", \"skip_broadcast\", \"update_first_only\", \"crash\", \"throw\", "
            "\"stop\", \"one_sided_sigmoid_loss\", \"eval_first_half\", or an array of them, got \"eval_half\"");
  EXPECT_EQ(resolve_error(with(R"(debug.fault=["update_first_only","eval_half"])"))
                .rfind("/debug/fault/1: must be one of", 0),
            0u)
      << resolve_error(with(R"(debug.fault=["update_first_only","eval_half"])"));
  EXPECT_NE(resolve_error(with(R"(debug.fault=["stop","stop"])")), "") << "each fault once";
  EXPECT_NE(resolve_error(with("debug.fault=[]")), "") << "none is \"none\"";
  EXPECT_EQ(resolve_error(with("debug.audits=ignore")),
            "/debug/audits: must be one of \"abort\", \"warn\", got \"ignore\"");
  // The rank check sees a stop inside the array too.
  EXPECT_EQ(resolve_error(with(R"(debug.fault=["update_first_only","stop"])")),
            "/debug/rank: must be < replicas.count (1) for fault \"stop\" (its default is 1), got 1");
}

TEST(Spec, OutOfRange) {
  EXPECT_EQ(resolve_error(with("optimizer.lr=-1")), "/optimizer/lr: must be > 0, got -1");
  EXPECT_EQ(resolve_error(with("epochs=0")), "/epochs: must be >= 1, got 0");
  EXPECT_EQ(resolve_error(with("model.dropout=1")), "/model/dropout: must be < 1, got 1");
  EXPECT_EQ(resolve_error(with("replicas.count=2000")), "/replicas/count: must be <= 1024, got 2000");
  EXPECT_EQ(resolve_error(with("optimizer.betas=[0.9,1.5]")), "/optimizer/betas/1: must be < 1, got 1.5");
  EXPECT_EQ(resolve_error(with("optimizer.betas=[0.9]")), "/optimizer/betas: must have at least 2 items, got [0.9]");
}

TEST(Spec, ReportComparisonSettingsAreChecked) {
  EXPECT_EQ(resolve_error(with("report.equivalence_pts=0")), "/report/equivalence_pts: must be > 0, got 0");
  EXPECT_EQ(resolve_error(with("report.final_epochs=0")), "/report/final_epochs: must be >= 1, got 0");
  EXPECT_NE(resolve_error(with("report.final_epochs=1.5")).find("/report/final_epochs"), std::string::npos);
  EXPECT_NE(resolve_error(with(R"(report.labels={"replicas.count=2": 2})")).find("/report/labels/replicas.count=2"),
            std::string::npos)
      << resolve_error(with(R"(report.labels={"replicas.count=2": 2})"));
  const ExperimentSpec s =
      resolve(with(R"(report={"equivalence_pts": 0.25, "final_epochs": 3, "labels": {"replicas.count=2": "2 GPUs"}})"));
  EXPECT_EQ(s.resolved["report"]["final_epochs"], 3);
  EXPECT_EQ(s.resolved["report"]["labels"]["replicas.count=2"], "2 GPUs");
  EXPECT_FALSE(resolve(minimal()).resolved["report"].contains("equivalence_pts")) << "unset stays unset";
}

TEST(Spec, EnumMessage) {
  EXPECT_EQ(resolve_error(with("replicas.reduce=avg")),
            "/replicas/reduce: must be one of \"mean\", \"sum\", got \"avg\"");
}

TEST(Spec, NameIsRequired) { EXPECT_EQ(resolve_error(json::object()), "/name: is required"); }

TEST(Spec, NameRejectsPathSeparators) {
  for (const char* bad : {"a/b", "..", "../x", ".hidden"}) {
    json doc = {{"name", bad}};
    std::string msg = resolve_error(doc);
    EXPECT_EQ(msg.rfind("/name: must match ", 0), 0u) << bad << ": " << msg;
  }
  EXPECT_EQ(resolve_error(json{{"name", "ok_name-1.2"}}), "");
}

TEST(Spec, BatchNeedsExactlyOne) {
  EXPECT_EQ(resolve_error(with(R"(batch={"per_replica":8,"global":16})")),
            "/batch: give exactly one of per_replica and global, got both (8 and 16); an override of one keeps the "
            "other, so switch by replacing the section: 'batch={\"global\":16}' or 'batch={\"per_replica\":8}'");
  EXPECT_EQ(resolve_error(with("batch={}")), "/batch: give exactly one of per_replica and global, got neither");
}

TEST(Spec, GlobalBatchMustDivide) {
  json doc = with("replicas.count=4");
  apply_override(doc, R"(batch={"global":66})");
  EXPECT_EQ(resolve_error(doc), "/batch/global: must be divisible by replicas.count (4), got 66");
}

TEST(Spec, AccumulateStepsSplitsEachReplicasBatchAndKeepsTheGlobalBatch) {
  ExperimentSpec s = resolve(with(R"(batch={"global":128,"accumulate_steps":4})"));
  EXPECT_EQ(s.accumulate_steps, 4);
  EXPECT_EQ(s.per_replica_batch, 128);
  EXPECT_EQ(s.global_batch, 128);
  EXPECT_EQ(s.resolved["batch"], json({{"global", 128}, {"accumulate_steps", 4}}));
  EXPECT_EQ(resolve(minimal()).accumulate_steps, 1);
}

TEST(Spec, AccumulateStepsMustDivideThePerReplicaBatch) {
  EXPECT_EQ(resolve_error(with(R"(batch={"per_replica":64,"accumulate_steps":3})")),
            "/batch/accumulate_steps: must divide the per-replica batch (64) into equal micro-batches, got 3");
  json doc = with("replicas.count=4");
  apply_override(doc, R"(batch={"global":128,"accumulate_steps":64})");
  EXPECT_EQ(resolve_error(doc),
            "/batch/accumulate_steps: must divide the per-replica batch (32) into equal micro-batches, got 64");
  apply_override(doc, "batch.accumulate_steps=32");
  EXPECT_EQ(resolve_error(doc), "");
  const std::string zero = resolve_error(with(R"(batch={"per_replica":64,"accumulate_steps":0})"));
  EXPECT_EQ(zero.rfind("/batch/accumulate_steps: must be >= 1", 0), 0u) << zero;
}

TEST(Spec, NcclRejectedWithoutCudaBuild) {
  if (ddplab::built_with_cuda()) GTEST_SKIP() << "CUDA build";
  json doc = with("replicas.backend=nccl");
  apply_override(doc, "replicas.device=cuda");
  std::string msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/backend: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("CUDA build of LibTorch"), std::string::npos) << msg;
  msg = resolve_error(with("replicas.device=cuda"));
  EXPECT_EQ(msg.rfind("/replicas/device: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("CUDA build of LibTorch"), std::string::npos) << msg;
}

TEST(Spec, BackendAutoResolvesByDevice) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_STREQ(config::name(s.replicas.backend), "gloo");
  EXPECT_EQ(s.resolved["replicas"]["backend"], "gloo") << "spec.json names the backend that ran";
  EXPECT_STREQ(config::name(resolve(with("replicas.backend=gloo")).replicas.backend), "gloo");
  if (ddplab::built_with_cuda()) {
    EXPECT_STREQ(config::name(resolve(with("replicas.device=cuda")).replicas.backend), "nccl");
  }
}

TEST(Spec, PrecisionAndGradDtype) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_STREQ(config::name(s.precision), "fp32");
  EXPECT_STREQ(config::name(s.replicas.grad_dtype), "fp32");
  s = resolve(with("precision=bf16"));
  EXPECT_STREQ(config::name(s.precision), "bf16");
  EXPECT_STREQ(config::name(resolve(with("replicas.grad_dtype=bf16")).replicas.grad_dtype), "bf16");
  std::string msg = resolve_error(with("precision=fp16"));
  EXPECT_EQ(msg.rfind("/precision: ", 0), 0u) << msg;
  msg = resolve_error(with("replicas.grad_dtype=int8"));
  EXPECT_EQ(msg.rfind("/replicas/grad_dtype: ", 0), 0u) << msg;
  EXPECT_STREQ(config::name(resolve(with("replicas.grad_dtype=fp16")).replicas.grad_dtype), "fp16");
}

TEST(Spec, PowerSgdIsChosenByCompressionAndTakesItsSettings) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_EQ(s.replicas.compression, Compression::kNone);
  EXPECT_EQ(s.resolved["replicas"]["powersgd"]["start_iter"], 1000) << "PyTorch's defaults, filled in";
  json doc = with("replicas.compression=powersgd");
  apply_override(doc, "replicas.powersgd.rank=4");
  apply_override(doc, "replicas.powersgd.start_iter=10");
  apply_override(doc, "replicas.powersgd.warm_start=false");
  s = resolve(doc);
  EXPECT_EQ(s.replicas.compression, Compression::kPowerSgd);
  EXPECT_EQ(s.replicas.powersgd.rank, 4);
  EXPECT_EQ(s.replicas.powersgd.start_iter, 10);
  EXPECT_FALSE(s.replicas.powersgd.warm_start);
  EXPECT_TRUE(s.replicas.powersgd.error_feedback);
  EXPECT_EQ(s.replicas.powersgd.min_compression_rate, 2.0);
}

TEST(Spec, PowerSgdRefusesWhatItCannotDoNamingTheField) {
  std::string msg = resolve_error(with("replicas.compression=topk"));
  EXPECT_EQ(msg.rfind("/replicas/compression: ", 0), 0u) << msg;
  json doc = with("replicas.compression=powersgd");
  apply_override(doc, "replicas.grad_dtype=bf16");
  msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/grad_dtype: PowerSGD", 0), 0u) << msg;
  doc = with("replicas.compression=powersgd");
  apply_override(doc, "replicas.mode=simulated");
  apply_override(doc, "replicas.count=2");
  msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/compression: simulated replicas", 0), 0u) << msg;
  doc = with("replicas.compression=powersgd");
  apply_override(doc, "replicas.powersgd.start_iter=1");
  msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/powersgd/start_iter: must be >= 2", 0), 0u) << msg;
  apply_override(doc, "replicas.powersgd.error_feedback=false");
  apply_override(doc, "replicas.powersgd.warm_start=false");
  EXPECT_EQ(resolve(doc).replicas.powersgd.start_iter, 1) << "without state PowerSGD may start at once";
  msg = resolve_error(with("replicas.powersgd.rank=0"));
  EXPECT_EQ(msg.rfind("/replicas/powersgd/rank: ", 0), 0u) << msg;
  msg = resolve_error(with("replicas.powersgd.ranks=2"));
  EXPECT_EQ(msg.rfind("/replicas/powersgd/ranks: unknown key", 0), 0u) << msg;
  EXPECT_EQ(resolve(with("replicas.powersgd.start_iter=1")).replicas.compression, Compression::kNone)
      << "settings PowerSGD would refuse are not checked while it is off";
}

TEST(Spec, IdxNeedsRoot) {
  EXPECT_EQ(resolve_error(with("dataset.name=idx")), "/dataset/root: dataset \"idx\" needs a root directory, got \"\"");
  json doc = with("dataset.name=idx");
  apply_override(doc, "dataset.root=/tmp/d");
  EXPECT_EQ(resolve(doc).dataset.root, "/tmp/d");
}

TEST(Spec, ThreadsResolved) {
  json doc = with("replicas.count=1024");
  apply_override(doc, "batch.per_replica=1");
  ExperimentSpec s = resolve(doc);
  EXPECT_EQ(s.replicas.threads, 1);  // never 0, even with more replicas than cores
  EXPECT_EQ(s.resolved["replicas"]["threads"], 1);
  s = resolve(minimal());
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(s.replicas.threads, std::max(1, cores));
  EXPECT_EQ(resolve(with("replicas.threads=3")).replicas.threads, 3);
}

TEST(Spec, SchemaTextIsTheSchema) {
  json schema = json::parse(schema_text());
  EXPECT_EQ(schema["title"], "ddplab experiment spec");
  EXPECT_TRUE(schema["properties"].contains("optimizer"));
}

TEST(Spec, NonObjectSpecRejected) {
  EXPECT_EQ(resolve_error(json::array()), "spec: the spec must be a JSON object, got []");
}

TEST(Spec, ReplicasModeAndSyncDefaults) {
  ExperimentSpec s = resolve(minimal());
  EXPECT_STREQ(config::name(s.replicas.mode), "processes");
  EXPECT_STREQ(config::name(s.replicas.sync.method), "allreduce");
  EXPECT_EQ(s.resolved["replicas"]["mode"], "processes");
  EXPECT_EQ(s.resolved["replicas"]["sync"], "allreduce");
}

TEST(Spec, LocalSgdAndEasgdParseWithDefaults) {
  ExperimentSpec s = resolve(with(R"(replicas.sync={"local_sgd":{"period":8}})"));
  EXPECT_STREQ(config::name(s.replicas.sync.method), "local_sgd");
  EXPECT_EQ(s.replicas.sync.period, 8);
  EXPECT_EQ(s.replicas.sync.start_epoch, 0);
  EXPECT_EQ(s.resolved["replicas"]["sync"], json::parse(R"({"local_sgd":{"period":8,"start_epoch":0}})"));
  json doc = with("replicas.count=4");
  apply_override(doc, R"(replicas.sync={"easgd":{"period":2,"alpha":0.2}})");
  s = resolve(doc);
  EXPECT_STREQ(config::name(s.replicas.sync.method), "easgd");
  EXPECT_EQ(s.replicas.sync.period, 2);
  EXPECT_DOUBLE_EQ(s.replicas.sync.alpha, 0.2);
}

TEST(Spec, WeightEmaDecay) {
  EXPECT_DOUBLE_EQ(resolve(minimal()).model.ema_decay, 0.0);
  EXPECT_DOUBLE_EQ(resolve(with("model.ema_decay=0.9999")).model.ema_decay, 0.9999);
  EXPECT_EQ(resolve_error(with("model.ema_decay=1")), "/model/ema_decay: must be < 1, got 1");
  EXPECT_EQ(resolve_error(with("model.ema_decay=-0.5")), "/model/ema_decay: must be >= 0, got -0.5");
  json doc = with("model.ema_decay=0.99");
  apply_override(doc, R"(replicas.sync={"local_sgd":{"period":8}})");
  EXPECT_EQ(resolve_error(doc).rfind("/model/ema_decay: local SGD and EASGD evaluate", 0), 0u) << resolve_error(doc);
}

TEST(Spec, BadSyncValuesNameThePointer) {
  EXPECT_EQ(
      resolve_error(with("replicas.sync=allreduc")),
      R"(/replicas/sync: must be one of "allreduce", {"local_sgd": {...}}, {"easgd": {...}}, got "allreduc"; did you mean "allreduce"?)");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"local_sgd":{"period":0}})")),
            "/replicas/sync/local_sgd/period: must be >= 1, got 0");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"local_sgd":{"period":4,"start_epoch":-1}})")),
            "/replicas/sync/local_sgd/start_epoch: must be >= 0, got -1");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"local_sgd":{"period":2.5}})")),
            "/replicas/sync/local_sgd/period: must be an integer, got 2.5");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"local_sgd":{}})")), "/replicas/sync/local_sgd/period: is required");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"local_sgd":{"perod":4}})")),
            "/replicas/sync/local_sgd/perod: unknown key; did you mean \"period\"?");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"localsgd":{"period":4}})")),
            "/replicas/sync/localsgd: unknown key; did you mean \"local_sgd\"?");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"easgd":{"period":4}})")), "/replicas/sync/easgd/alpha: is required");
  EXPECT_EQ(resolve_error(with(R"(replicas.sync={"easgd":{"period":4,"alpha":1.5}})")),
            "/replicas/sync/easgd/alpha: must be <= 1, got 1.5");
  std::string both =
      resolve_error(with(R"(replicas.sync={"easgd":{"period":4,"alpha":0.1},"local_sgd":{"period":2}})"));
  EXPECT_EQ(both.rfind("/replicas/sync: must be one of ", 0), 0u) << both;
  EXPECT_EQ(resolve_error(with("replicas.mode=threads")),
            "/replicas/mode: must be one of \"processes\", \"simulated\", got \"threads\"");
}

TEST(Spec, EasgdAlphaMustNotOvershootTheCenter) {
  json doc = with("replicas.count=4");
  apply_override(doc, R"(replicas.sync={"easgd":{"period":1,"alpha":0.3}})");
  std::string msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/sync/easgd/alpha: must be <= 1 / replicas.count (4)", 0), 0u) << msg;
  EXPECT_NE(msg.find("got 0.3"), std::string::npos) << msg;
  apply_override(doc, R"(replicas.sync={"easgd":{"period":1,"alpha":0.25}})");
  EXPECT_EQ(resolve_error(doc), "");
}

TEST(Spec, SimulatedReplicasSyncByAllReduceAndUseAllCores) {
  json doc = with("replicas.mode=simulated");
  apply_override(doc, "replicas.count=4");
  ExperimentSpec s = resolve(doc);
  EXPECT_STREQ(config::name(s.replicas.mode), "simulated");
  EXPECT_EQ(s.replicas.threads, std::max(1, static_cast<int>(std::thread::hardware_concurrency())))
      << "one process does the work of all replicas";
  apply_override(doc, R"(replicas.sync={"local_sgd":{"period":2}})");
  std::string msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/replicas/sync: simulated replicas", 0), 0u) << msg;
}

// replicas.cuda_graph captures one replica's step: what it cannot hold is named, all of it at once.
TEST(Spec, ACudaGraphTakesOneReplicaInFp32WithoutMicroBatchesOrEma) {
  EXPECT_FALSE(resolve(minimal()).replicas.cuda_graph);
  EXPECT_TRUE(resolve(with("replicas.cuda_graph=true")).replicas.cuda_graph);
  json doc = with("replicas.cuda_graph=true");
  apply_override(doc, "replicas.count=2");
  apply_override(doc, "precision=bf16");
  apply_override(doc, "model.ema_decay=0.99");
  EXPECT_EQ(resolve_error(doc),
            "/replicas/cuda_graph: a captured step takes one replica in one process, precision \"fp32\", "
            "batch.accumulate_steps 1, model.ema_decay 0 and replicas.sync \"allreduce\"; got true with "
            "replicas.count 2, precision \"bf16\", model.ema_decay 0.99");
  doc = with("replicas.cuda_graph=true");
  apply_override(doc, R"(batch={"per_replica":64,"accumulate_steps":2})");
  EXPECT_NE(resolve_error(doc).find("got true with batch.accumulate_steps 2"), std::string::npos) << resolve_error(doc);
  doc = with("replicas.cuda_graph=true");
  apply_override(doc, "replicas.mode=simulated");
  EXPECT_NE(resolve_error(doc).find("got true with replicas.mode \"simulated\""), std::string::npos);
}

TEST(Spec, SimulatedReplicasRejectSyncBn) {
  json doc = with("replicas.mode=simulated");
  apply_override(doc, "model.sync_bn=true");
  std::string msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/model/sync_bn: simulated replicas", 0), 0u) << msg;
}

// sync_bn cannot reach the BatchNorm inside a scripted module: asked for, it is refused, not ignored.
TEST(Spec, TorchscriptModelRejectsSyncBn) {
  json doc = with("model.torchscript=net.pt");
  EXPECT_NO_THROW(resolve(doc));
  apply_override(doc, "model.sync_bn=true");
  const std::string msg = resolve_error(doc);
  EXPECT_EQ(msg.rfind("/model/sync_bn: a TorchScript module", 0), 0u) << msg;
}

// testing::error_of: any exception other than ddplab::Error escapes and fails the test (those were the bugs).
using testing::error_of;

// Issue 8, bad input never crashes (tests/fuzz): nlohmann throws out_of_range, not
// parse_error, for a number beyond double's range, and it escaped load_json_file and
// apply_override (exit 1, not 2).
TEST(Spec, NumberOverflowInASpecFileIsAUserError) {
  testing::TempDir dir;
  std::string path = dir.str("big.json");
  testing::write_file(path, R"({"name": "x", "epochs": 1e999})");
  EXPECT_EQ(error_of([&] { load_json_file(path); }), path + ": malformed JSON: number overflow parsing '1e999'");
}

TEST(Spec, OverrideWithANumberOverflowIsAUserError) {
  json doc = minimal();
  EXPECT_EQ(error_of([&] { apply_override(doc, "optimizer.lr=-1e400"); }),
            "override \"optimizer.lr=-1e400\": number overflow parsing '-1e400'");
}

// An override value that is not UTF-8 became a JSON string that every later dump() (error
// messages, spec.json) threw nlohmann::type_error on.
TEST(Spec, OverrideThatIsNotUtf8IsAUserError) {
  json doc = minimal();
  EXPECT_EQ(error_of([&] { apply_override(doc, "name=\xff"); }), "override \"name=\xff\": not valid UTF-8");
  EXPECT_EQ(error_of([&] { apply_override(doc, "out\xc3put=x"); }), "override \"out\xc3put=x\": not valid UTF-8");
  apply_override(doc, "output=r\xc3\xa9sultats");  // UTF-8 is fine
  EXPECT_EQ(doc["output"], "r\xc3\xa9sultats");
}

// nlohmann parses any depth, but dump, copy and compare recurse per level: a spec (or an
// override value) of 20000 nested brackets overflowed the stack.
TEST(Spec, DeeplyNestedJsonIsAUserErrorNotAStackOverflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of([&] { parse_json_text(deep, "deep.json"); }), "deep.json: JSON nested deeper than 64 levels");
  json doc = minimal();
  EXPECT_EQ(error_of([&] { apply_override(doc, "sweep.seed=" + deep); }),
            "override \"sweep.seed=" + deep + "\": JSON nested deeper than 64 levels");
  // Ordinary nesting still parses.
  EXPECT_EQ(parse_json_text(std::string(10, '[') + std::string(10, ']'), "ok.json").dump(), "[[[[[[[[[[]]]]]]]]]]");
}

// valijson matches `pattern` with std::regex, which recurses once per character: a 300000
// character name overflowed the stack. maxLength is now checked first.
TEST(Spec, OverlongNameIsRejectedBeforeItsPatternIsTried) {
  EXPECT_EQ(resolve_error({{"name", std::string(1000000, 'a')}}), "/name: must be at most 128 characters, got 1000000");
  EXPECT_EQ(resolve_error({{"name", std::string(129, 'a')}}), "/name: must be at most 128 characters, got 129");
  EXPECT_EQ(resolve_error({{"name", std::string(128, 'a')}}), "");
}

// std::regex compiles a pattern by recursive descent, one level per group: a weight_decay_groups
// match of 30000 nested parentheses (a 60 KB spec) overflowed the stack when resolve() checked
// that it compiles (SIGSEGV in a release build). match is now at most 256 characters.
TEST(Spec, DeeplyNestedWeightDecayRegexIsRejectedNotAStackOverflow) {
  auto doc_with_match = [](const std::string& match) {
    return json{{"name", "x"}, {"optimizer", {{"weight_decay_groups", {{{"match", match}, {"weight_decay", 0.1}}}}}}};
  };
  EXPECT_EQ(resolve_error(doc_with_match(std::string(30000, '(') + "a" + std::string(30000, ')'))),
            "/optimizer/weight_decay_groups/0/match: must be at most 256 characters, got 60001");
  EXPECT_EQ(resolve_error(doc_with_match(std::string(127, '(') + "a" + std::string(127, ')'))), "");
}

// per_replica * replicas.count overflowed int64 (undefined behaviour) for per_replica near 2^63.
TEST(Spec, HugeBatchIsRejectedInsteadOfOverflowing) {
  json doc = with("replicas.count=2");
  apply_override(doc, "batch.per_replica=9223372036854775807");
  EXPECT_EQ(resolve_error(doc), "/batch/per_replica: must be <= 2147483647, got 9223372036854775807");
  doc = with(R"(batch={"global":4294967296})");
  EXPECT_EQ(resolve_error(doc), "/batch/global: must be <= 2147483647, got 4294967296");
}

TEST(Spec, StepLoggingIsOffByDefaultAndChecked) {
  EXPECT_EQ(resolve(minimal()).log.every_steps, 0);
  EXPECT_EQ(resolve(with("log.every_steps=25")).log.every_steps, 25);
  EXPECT_EQ(resolve_error(with("log.every_steps=-1")), "/log/every_steps: must be >= 0, got -1");
  EXPECT_EQ(resolve_error(with("log.every_steps=2.5")), "/log/every_steps: must be an integer, got 2.5");
  EXPECT_EQ(resolve_error(with("log.every_steps=1000000001")),
            "/log/every_steps: must be <= 1000000000, got 1000000001");
}

TEST(Spec, EvaluationPointsAreOffByDefaultAndFallOnStepRecords) {
  const ExperimentSpec off = resolve(minimal());
  EXPECT_EQ(off.log.eval_every_steps, 0);
  EXPECT_EQ(off.log.eval_samples, 1000);
  EXPECT_EQ(off.log.step_record_every(), 0) << "no step records without either cadence";
  EXPECT_EQ(resolve(with("log.eval_every_steps=30")).log.step_record_every(), 30) << "records close at the points";
  json both = with("log.every_steps=10");
  apply_override(both, "log.eval_every_steps=30");
  EXPECT_EQ(resolve(both).log.step_record_every(), 10);
  apply_override(both, "log.eval_every_steps=25");
  EXPECT_EQ(resolve_error(both), "/log/eval_every_steps: must be a multiple of log.every_steps (10), got 25");
  EXPECT_EQ(resolve_error(with("log.eval_samples=-1")), "/log/eval_samples: must be >= 0, got -1");
}

// Integers the typed spec could not hold were narrowed silently (threads 4294967297 ran with 1
// thread while spec.json said 4294967297) or wrapped (seed 2^64-1 got valijson's bare
// "Expected number greater than or equal to 0.000000").
TEST(Spec, IntegersTooLargeForTheirFieldAreRejected) {
  EXPECT_EQ(resolve_error(with("replicas.threads=4294967297")), "/replicas/threads: must be <= 1024, got 4294967297");
  EXPECT_EQ(resolve_error(with("replicas.max_restarts=4294967296")),
            "/replicas/max_restarts: must be <= 1000, got 4294967296");
  EXPECT_EQ(resolve_error(with("debug.rank=2147483648")), "/debug/rank: must be <= 1023, got 2147483648");
  EXPECT_EQ(resolve_error(with("checkpoint.every_epochs=2147483648")),
            "/checkpoint/every_epochs: must be <= 100000, got 2147483648");
  EXPECT_EQ(resolve_error(with("seed=18446744073709551615")),
            "/seed: must be <= 9007199254740991, got 18446744073709551615");
  EXPECT_EQ(resolve_error(with("model.hidden=9223372036854775808")),
            "/model/hidden: must be <= 65536, got 9223372036854775808");
  for (const char* key : {"dataset.train_limit", "dataset.test_limit", "schedule.base_batch", "debug.step"}) {
    std::string message = resolve_error(with(std::string(key) + "=9223372036854775808"));
    EXPECT_NE(message.find(": must be <= 9007199254740991, got 9223372036854775808"), std::string::npos) << message;
  }
  ExperimentSpec s = resolve(with("seed=9007199254740991"));
  EXPECT_EQ(s.seed, 9007199254740991);
}

// What the layers below throw for a spec value that fails against the data or the machine.
TEST(SpecError, NamesThePointerFirst) {
  EXPECT_STREQ(spec_error("/batch", "the global batch 128 is larger than the 64 training samples").what(),
               "/batch: the global batch 128 is larger than the 64 training samples");
  EXPECT_STREQ(spec_error("/optimizer/weight_decay_groups/2/match", "matches no parameter").what(),
               "/optimizer/weight_decay_groups/2/match: matches no parameter");
}

// A spec.json from before model.ema_decay and log existed reads as today's defaults.
TEST(Spec, WithDefaultsFillsFieldsAnOlderSpecLacks) {
  json old = resolve(minimal()).resolved;
  old["model"].erase("ema_decay");
  old.erase("log");
  old["model"]["dropout"] = 0.25;
  const json filled = with_defaults(old);
  EXPECT_EQ(filled["model"]["ema_decay"], 0);
  EXPECT_EQ(filled["log"]["every_steps"], 0);
  EXPECT_EQ(filled["model"]["dropout"], 0.25) << "a value that is there stays";
  json expected = resolve(with("model.dropout=0.25")).resolved;
  for (const char* k : {"repeats", "sweep", "sweep_zip"}) expected[k] = filled[k];  // resolve() drops them
  EXPECT_EQ(filled, expected);
}

// Issue 59: a layers model's spec.json said dropout 0.5 and hidden 128, which it never used. A
// model option the chosen model does not use (its schema "models" list) is refused when given and
// left out of the resolved spec (and of an older spec.json read back) when not.
TEST(Spec, AModelOptionTheModelDoesNotUseIsRefusedWhenGivenAndLeftOutOtherwise) {
  const char* layers = R"(model.layers=[{"type": "flatten"}, {"type": "linear", "features": 10}])";
  const json own = resolve(with(layers)).resolved;
  EXPECT_FALSE(own["model"].contains("dropout")) << own["model"].dump();
  EXPECT_FALSE(own["model"].contains("hidden")) << own["model"].dump();
  EXPECT_EQ(resolve(minimal()).resolved["model"]["dropout"], 0.5);
  EXPECT_FALSE(resolve(minimal()).resolved["model"].contains("hidden")) << "mnist_cnn has no hidden layer size";
  EXPECT_EQ(resolve(with("model.name=mlp")).resolved["model"]["hidden"], 128);
  EXPECT_DOUBLE_EQ(resolve(with(layers)).model.dropout, 0.5) << "the typed field keeps its default, unused";

  json doc = with("model.torchscript=net.pt");
  apply_override(doc, "model.dropout=0.3");
  EXPECT_EQ(resolve_error(doc),
            "/model/dropout: only mnist_cnn and mlp use it, and model.name is \"torchscript\"; leave it out, got 0.3");
  EXPECT_EQ(resolve_error(with("model.hidden=64")),
            "/model/hidden: only mlp uses it, and model.name is \"mnist_cnn\"; leave it out, got 64");
  EXPECT_EQ(resolve_error(with("model.hidden=0")), "/model/hidden: must be >= 1, got 0") << "the value first";

  json old = own;
  old["model"]["dropout"] = 0.5;
  old["model"]["hidden"] = 128;
  EXPECT_EQ(upgraded_spec(old), upgraded_spec(own)) << "an older spec.json of the same model reads the same";
}

// dataset.order's default ("independent") is not what ddplab did before the field existed.
TEST(Spec, UpgradedSpecReadsAMissingDataOrderAsTheOrderOfItsTime) {
  json old = resolve(minimal()).resolved;
  old["dataset"].erase("order");
  old["model"].erase("ema_decay");
  const json upgraded = upgraded_spec(old);
  EXPECT_EQ(upgraded["dataset"]["order"], "torch_sampler");
  EXPECT_EQ(upgraded["model"]["ema_decay"], 0) << "other fields: their defaults";
  const json today = resolve(minimal()).resolved;
  EXPECT_EQ(upgraded_spec(today)["dataset"]["order"], today["dataset"]["order"]) << "a value that is there stays";
}

}  // namespace
}  // namespace ddplab::config
