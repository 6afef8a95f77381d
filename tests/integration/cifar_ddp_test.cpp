// CIFAR end to end with real ranks over c10d Gloo on 127.0.0.1 and tiny CIFAR-format files:
// augmentation keyed per sample keeps N x B/N equal to 1 x B; BatchNorm with sync_bn keeps it
// too, per-replica BatchNorm does not; missing or broken CIFAR files are user errors.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/exit_codes.h"
#include "ddplab/config/spec.h"
#include "ddplab/data/loader.h"
#include "ddplab/data/transform.h"
#include "ddplab/train/options.h"
#include "integration/integration_util.h"

namespace ddplab::testing {
namespace {

namespace fs = std::filesystem;

const models::InputShape kCifar32{3, 32, 32, 10};
const models::InputShape kCifar24{3, 24, 24, 10};

struct RunOutput {
  CommandResult command;
  std::vector<nlohmann::json> records;
  std::vector<float> params;
};

// A tiny CIFAR-10 (64 train, 32 test) next to the workspace's MNIST files.
fs::path cifar_data(const Workspace& ws) {
  fs::path dir = ws.dir().path() / "cifar";
  if (!fs::exists(dir)) write_tiny_cifar(dir, 64, 32);
  return dir;
}

nlohmann::json cifar_spec(const Workspace& ws, const std::string& model, const std::string& augment) {
  auto spec = ws.base_spec("cifar");
  spec["dataset"] = {{"name", "cifar10"}, {"root", cifar_data(ws).string()}, {"augment", augment}};
  spec["model"] = {{"name", model}};
  spec["batch"] = {{"global", 32}};
  return spec;
}

RunOutput run_spec(const Workspace& ws, nlohmann::json spec, const std::string& name, const models::InputShape& shape) {
  spec["name"] = name;
  RunOutput out;
  out.command = run_ddplab("run " + ws.write_spec(spec, name + ".json"));
  fs::path dir = ws.out() / name / ("seed=" + std::to_string(spec["seed"].get<int>()));
  out.records = read_records(dir);
  if (fs::exists(dir / "model.pt")) out.params = read_final_params(dir, spec["model"], shape);
  return out;
}

// The same spec on 1 replica and on 2 (runs <prefix>_one and <prefix>_two); both must finish. The
// tiny random images leave them at chance, which ends a run as collapsed (exit code 4): what is
// compared here is the replicas' arithmetic, not learning.
std::pair<RunOutput, RunOutput> run_on_one_and_two(const Workspace& ws, nlohmann::json spec, const std::string& prefix,
                                                   const models::InputShape& shape) {
  spec["replicas"]["count"] = 1;
  auto one = run_spec(ws, spec, prefix + "_one", shape);
  EXPECT_TRUE(one.command.exit_code == kExitOk || one.command.exit_code == kExitCollapsed) << one.command.output;
  spec["replicas"]["count"] = 2;
  auto two = run_spec(ws, spec, prefix + "_two", shape);
  EXPECT_TRUE(two.command.exit_code == kExitOk || two.command.exit_code == kExitCollapsed) << two.command.output;
  return {std::move(one), std::move(two)};
}

// The test loss of <out>/<name>/seed=3/model.pt (rank 0's final model) over the whole test set.
double saved_model_test_loss(const Workspace& ws, nlohmann::json spec, const std::string& name,
                             const models::InputShape& shape) {
  spec["name"] = name;
  const auto s = config::resolve(spec);
  const auto data = data::load_dataset(train::dataset_options(s.dataset));
  auto model = models::make_model(train::model_options(s.model), shape);
  torch::load(model, (ws.out() / name / "seed=3" / "model.pt").string());
  model->eval();
  torch::NoGradGuard no_grad;
  auto batch =
      data::make_batch(data.test, torch::arange(data.test.size()), *data::make_transform(s.dataset.augment, data),
                       /*train=*/false);
  return torch::cross_entropy_loss(model->forward(batch.x), batch.y).item<double>();
}

double relative(double a, double b) { return std::fabs(a - b) / std::fabs(a); }

void expect_same_training(const RunOutput& a, const RunOutput& b, double tol) {
  ASSERT_EQ(a.records.size(), b.records.size());
  ASSERT_FALSE(a.records.empty());
  for (size_t e = 0; e < a.records.size(); ++e) {
    double la = a.records[e]["train_loss"], lb = b.records[e]["train_loss"];
    EXPECT_LE(relative(la, lb), tol) << "epoch " << e + 1 << ": " << la << " vs " << lb;
  }
  EXPECT_LE(max_relative_difference(a.params, b.params), tol);
}

TEST(CifarDdp, TfTutorialPipelineOnReplicasEqualsOneReplica) {
  // The tutorial's model, transform and fc-only weight decay: random crops, flips, brightness and
  // contrast are drawn per sample, so 2 x 16 replicas train exactly as 1 x 32.
  Workspace ws(64, 32);
  auto spec = cifar_spec(ws, "cifar_tf_cnn", "tf_tutorial");
  spec["optimizer"]["weight_decay_groups"] = {{{"match", "^fc[12]\\.weight$"}, {"weight_decay", 0.004}}};
  auto [one, two] = run_on_one_and_two(ws, spec, "tf", kCifar24);
  expect_same_training(one, two, 1e-5);
  EXPECT_NEAR(one.records.back()["test_acc"].get<double>(), two.records.back()["test_acc"].get<double>(), 1e-9);
}

TEST(CifarDdp, SyncBatchNormReplicasEqualOneReplicaAndPerReplicaBatchNormDoesNot) {
  Workspace ws(64, 32);
  auto spec = cifar_spec(ws, "resnet20", "standard");
  spec["model"]["sync_bn"] = true;
  // Small steps without momentum: on 64 noise images ResNet-20 amplifies float rounding quickly
  // (at lr 0.01, two 1-replica runs with 1 and 2 threads already differ by 2e-5 in parameters after
  // 4 steps), which would hide what is compared here.
  spec["optimizer"] = {{"name", "sgd"}, {"lr", 0.002}, {"momentum", 0.0}};
  auto [one, two] = run_on_one_and_two(ws, spec, "sync", kCifar32);
  expect_same_training(one, two, 1e-5);
  // The noise scale assumes the replicas' gradients are of B/N independent samples; under
  // sync_bn they are not, so it is not measured (null), while plain BatchNorm measures it below.
  for (const auto& rec : two.records) {
    EXPECT_TRUE(rec["grad_noise_scale"].is_null()) << rec.dump();
    EXPECT_TRUE(rec["gns_trace_ema"].is_null()) << rec.dump();
  }

  // Without sync_bn each replica normalizes with its own 16 samples: another computation.
  spec["model"]["sync_bn"] = false;
  auto [plain_one, plain_two] = run_on_one_and_two(ws, spec, "plain", kCifar32);
  ASSERT_EQ(plain_one.records.size(), plain_two.records.size());
  ASSERT_FALSE(plain_one.records.empty());
  EXPECT_TRUE(plain_two.records.back()["gns_trace_ema"].is_number()) << plain_two.records.back().dump();
  double gap = 0;
  for (size_t e = 0; e < plain_one.records.size(); ++e)
    gap = std::max(gap, relative(plain_one.records[e]["train_loss"], plain_two.records[e]["train_loss"]));
  EXPECT_GT(gap, 10 * 1e-5) << "per-replica BatchNorm should differ well beyond the sync_bn tolerance";
  EXPECT_GT(max_relative_difference(plain_one.params, plain_two.params), 10 * 1e-5);
  // Rank 0's running statistics are broadcast before evaluation: both ranks evaluated the model
  // that rank 0 saved, so its test loss over the whole test set is the recorded one.
  spec["replicas"]["count"] = 2;
  EXPECT_LE(relative(saved_model_test_loss(ws, spec, "plain_two", kCifar32), plain_two.records.back()["test_loss"]),
            1e-6);
  // One replica: sync_bn is the same arithmetic as plain BatchNorm, to rounding.
  EXPECT_LE(relative(one.records.back()["train_loss"], plain_one.records.back()["train_loss"]), 1e-4);
}

void expect_user_error(const CommandResult& r, const std::vector<std::string>& culprits) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const auto& c : culprits)
    EXPECT_NE(r.output.find(c), std::string::npos) << "expected '" << c << "' in: " << r.output;
}

TEST(CifarCli, MissingCifarDataIsAUserErrorBeforeAnyRunDirectory) {
  Workspace ws(64, 32);
  auto spec = cifar_spec(ws, "resnet20", "none");
  spec["name"] = "bad";
  const std::string root = ws.dir().str("cifar-10-batches-bin");
  spec["dataset"]["root"] = root;
  auto path = ws.write_spec(spec, "bad.json");
  expect_user_error(run_ddplab("run " + path), {root, "cifar-10-binary.tar.gz", "docs/data.md"});
  EXPECT_FALSE(fs::exists(ws.out() / "bad")) << "a run directory was left behind";
  // A dry run lists the runs, then says the data are missing.
  auto dry = run_ddplab("run " + path + " --dry-run");
  expect_user_error(dry, {"[1/1] seed=3", root});
  EXPECT_FALSE(fs::exists(ws.out() / "bad"));
}

TEST(CifarCli, TruncatedCifarFileIsAUserErrorNamingIt) {
  Workspace ws(64, 32);
  auto spec = cifar_spec(ws, "mlp", "none");
  spec["name"] = "bad";
  const fs::path file = cifar_data(ws) / "data_batch_3.bin";
  fs::resize_file(file, fs::file_size(file) - 100);
  expect_user_error(run_ddplab("run " + ws.write_spec(spec, "bad.json")), {file.string(), "multiple of 3073"});
  EXPECT_FALSE(fs::exists(ws.out() / "bad"));
}

}  // namespace
}  // namespace ddplab::testing
