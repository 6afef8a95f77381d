// log.eval_every_steps (train/evaluator.h) through the Trainer: where the evaluation points fall,
// that they change nothing of training, what they evaluate, and that a stopped and resumed run
// keeps them. Tiny MNIST files (integration_util.h): 256 training images, global batch 64, so 4
// steps per epoch.
#include "ddplab/train/evaluator.h"

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "ddplab/rundir/run_log.h"
#include "integration/integration_util.h"
#include "test_util.h"
#include "train/train_ranks.h"

namespace ddplab::train {
namespace {

using nlohmann::json;

// The global steps of the step records that hold an evaluation point, and of all records.
std::vector<int64_t> steps_of(const std::vector<json>& lines, bool points_only) {
  std::vector<int64_t> out;
  for (const auto& l : lines)
    if (!points_only || l.contains("eval_acc")) out.push_back(l["step"].get<int64_t>());
  return out;
}

json manifest_of(const config::ExperimentSpec& spec) {
  return json::parse(ddplab::testing::read_file(rundir::manifest_file(rundir::run_dir(spec))));
}

// Step records without their timing field, and without the evaluation points' fields.
std::vector<json> training_fields(std::vector<json> lines) {
  for (auto& l : lines)
    for (const char* k : {"elapsed_s", "eval_loss", "eval_acc"}) l.erase(k);
  return lines;
}

TEST(Evaluator, PointsFallAfterEveryKthStepOfAnEpochAndItsLastAndNowhereWithoutTheCadence) {
  ddplab::testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("points");
  doc["log"] = {{"eval_every_steps", 3}, {"eval_samples", 40}};
  const auto with_points = config::resolve(doc);
  train_observed(with_points, 1);
  const auto lines = step_lines(with_points);
  EXPECT_EQ(steps_of(lines, false), (std::vector<int64_t>{3, 4, 7, 8})) << "records close at the points";
  EXPECT_EQ(steps_of(lines, true), (std::vector<int64_t>{3, 4, 7, 8}));
  for (const auto& l : lines) {
    EXPECT_GE(l["eval_acc"].get<double>(), 0.0);
    EXPECT_LE(l["eval_acc"].get<double>(), 1.0);
    EXPECT_GT(l["eval_loss"].get<double>(), 0.0);
  }
  EXPECT_EQ(manifest_of(with_points)["step_eval"], (json{{"every_steps", 3}, {"set", "test"}, {"samples", 40}}));

  doc["log"] = {{"every_steps", 1}, {"eval_every_steps", 2}};
  const auto every_step = config::resolve(doc);
  train_observed(every_step, 1);
  EXPECT_EQ(steps_of(step_lines(every_step), false), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(steps_of(step_lines(every_step), true), (std::vector<int64_t>{2, 4, 6, 8}));
  EXPECT_EQ(manifest_of(every_step)["step_eval"]["samples"], 64) << "at most the set: 64 test images";

  doc["log"] = json::object();
  const auto without = config::resolve(doc);
  train_observed(without, 1);
  EXPECT_TRUE(step_lines(without).empty()) << "no steps.jsonl without either cadence";
  EXPECT_FALSE(manifest_of(without).contains("step_eval"));
}

// Two replicas simulated in one process (threads as ranks would draw their initial weights from
// one generator in a racy order), dropout on: the points draw no mask, move no BatchNorm
// statistic and put the weights back, so epochs.jsonl and the step records' training fields are
// those of the run without points, bit for bit.
TEST(Evaluator, TrainingRecordsAreTheSameWithPointsAndWithout) {
  ddplab::testing::Workspace ws(/*train=*/256, /*test=*/64);
  const json batch_norm_model = ddplab::testing::batch_norm_dropout_model(0.3);
  const json mlp_with_ema = {{"name", "mlp"}, {"hidden", 32}, {"dropout", 0.3}, {"ema_decay", 0.9}};
  for (const json& model : {batch_norm_model, mlp_with_ema}) {
    SCOPED_TRACE(model.dump());
    auto doc = ws.base_spec("without");
    doc["model"] = model;
    doc["replicas"]["count"] = 2;
    doc["replicas"]["mode"] = "simulated";
    doc["log"] = {{"every_steps", 1}};
    const auto without = config::resolve(doc);
    train_observed(without, 1);
    doc["name"] = "with";
    doc["log"]["eval_every_steps"] = 1;
    const auto with_points = config::resolve(doc);
    train_observed(with_points, 1);
    EXPECT_EQ(steps_of(step_lines(with_points), true).size(), 8U) << "a point after every step";
    EXPECT_EQ(numeric_records(with_points), numeric_records(without));
    EXPECT_EQ(training_fields(step_lines(with_points)), training_fields(step_lines(without)));
  }
}

// The point after an epoch's last step evaluates the epoch end's weights (here a weight EMA's
// average) on its images: with all of them, it is the epoch record's accuracy, on the test set
// without a validation split and on the split with one. Two ranks in processes' layout (threads
// over Gloo): each evaluates its slice and the sums are all-reduced.
TEST(Evaluator, ThePointAtAnEpochsEndWithEveryImageIsTheEpochRecordsAccuracy) {
  ddplab::testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("whole_set");
  doc["replicas"]["count"] = 2;
  doc["model"]["ema_decay"] = 0.9;
  doc["log"] = {{"eval_every_steps", 4}, {"eval_samples", 0}};
  for (const json& validation : {json(0), json(64)}) {
    doc["dataset"]["validation"] = validation;
    const auto spec = config::resolve(doc);
    train_observed(spec, 2);
    const auto records = ddplab::testing::read_records(rundir::run_dir(spec));
    const auto lines = step_lines(spec);
    ASSERT_EQ(lines.size(), records.size()) << "one point per epoch, at its last step";
    const bool on_validation = validation != 0;
    EXPECT_EQ(manifest_of(spec)["step_eval"]["set"], on_validation ? "validation" : "test");
    for (size_t e = 0; e < records.size(); ++e) {
      EXPECT_EQ(lines[e]["step"], records[e]["step"]);
      EXPECT_DOUBLE_EQ(lines[e]["eval_acc"].get<double>(),
                       records[e][on_validation ? "val_acc" : "test_acc"].get<double>());
      EXPECT_NEAR(lines[e]["eval_loss"].get<double>(),
                  records[e][on_validation ? "val_loss" : "test_loss"].get<double>(), 1e-12);
      EXPECT_GE(lines[e]["elapsed_s"].get<double>(), 0.0);
    }
  }
}

// Under every replicas.sync the point at an epoch's last step evaluates what the run holds after
// that step, which is what the epoch's record evaluates: the replicas' mean under local SGD, the
// center after its elastic step under EASGD (period 2: the epoch's last step makes one; the point
// was taken before it, a period late). Two ranks over Gloo, every test image.
TEST(Evaluator, ThePointAtAnEpochsLastStepIsTheEpochRecordUnderEverySyncMethod) {
  ddplab::testing::Workspace ws(/*train=*/256, /*test=*/64);
  const std::vector<json> syncs{json("allreduce"), json{{"local_sgd", {{"period", 3}}}},
                                json{{"local_sgd", {{"period", 2}}}}, json{{"easgd", {{"period", 2}, {"alpha", 0.4}}}}};
  for (const json& sync : syncs) {
    SCOPED_TRACE(sync.dump());
    auto doc = ws.base_spec("sync_points");
    doc["replicas"]["count"] = 2;
    doc["replicas"]["sync"] = sync;
    doc["log"] = {{"eval_every_steps", 2}, {"eval_samples", 0}};
    const auto spec = config::resolve(doc);
    train_observed(spec, 2);
    const auto records = ddplab::testing::read_records(rundir::run_dir(spec));
    std::vector<json> last_points;
    for (const auto& l : step_lines(spec))
      if (l["step"].get<int64_t>() % 4 == 0) last_points.push_back(l);
    ASSERT_EQ(last_points.size(), records.size());
    for (size_t e = 0; e < records.size(); ++e) {
      EXPECT_EQ(last_points[e]["step"], records[e]["step"]);
      EXPECT_DOUBLE_EQ(last_points[e]["eval_acc"].get<double>(), records[e]["test_acc"].get<double>())
          << "epoch " << e + 1;
      EXPECT_NEAR(last_points[e]["eval_loss"].get<double>(), records[e]["test_loss"].get<double>(), 1e-12)
          << "epoch " << e + 1;
    }
  }
}

// A clean stop between two points, then resume (as trainer_test.cpp's stop test): the points fall
// at the same steps with the same values as in the run never stopped.
TEST(Evaluator, AStoppedAndResumedRunKeepsThePoints) {
  ddplab::testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("never_stopped");
  doc["replicas"]["count"] = 2;
  doc["replicas"]["mode"] = "simulated";
  doc["model"]["dropout"] = 0.3;
  doc["log"] = {{"eval_every_steps", 2}, {"eval_samples", 50}};
  const auto never_stopped = config::resolve(doc);
  train_observed(never_stopped, 1);

  doc["name"] = "stopped";
  doc["debug"] = {{"fault", "stop"}, {"rank", 0}, {"step", 5}};  // stops after global step 7
  const auto stopped = config::resolve(doc);
  const auto first = train_ranks(stopped, 1);
  thrown<Interrupted>(first[0]);
  const auto second = train_ranks(stopped, 1, /*resume=*/true);
  EXPECT_FALSE(second[0].error) << "the resumed attempt finishes";

  std::vector<json> a, b;
  for (const auto& l : step_lines(never_stopped)) a.push_back({l["step"], l["eval_loss"], l["eval_acc"]});
  for (const auto& l : step_lines(stopped))
    if (l.contains("eval_acc")) b.push_back({l["step"], l["eval_loss"], l["eval_acc"]});
  EXPECT_EQ(steps_of(step_lines(stopped), false), (std::vector<int64_t>{2, 4, 6, 7, 8})) << "and the stop's record";
  EXPECT_EQ(b, a);
  EXPECT_EQ(numeric_records(stopped), numeric_records(never_stopped));
}

}  // namespace
}  // namespace ddplab::train
