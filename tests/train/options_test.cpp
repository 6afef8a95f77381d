// The layers' options structs (data, models, distributed) default to what the spec's defaults
// map to, so a layer used without a spec (a benchmark, a test) behaves as a default spec does.
#include "ddplab/train/options.h"

#include <gtest/gtest.h>

namespace ddplab::train {
namespace {

TEST(Options, ModelOptionsDefaultAsTheSpec) {
  const models::ModelOptions own;
  const models::ModelOptions from_spec = model_options(config::ModelSpec{});
  EXPECT_EQ(own.name, from_spec.name);
  EXPECT_EQ(own.dropout, from_spec.dropout);
  EXPECT_EQ(own.hidden, from_spec.hidden);
  EXPECT_EQ(own.sync_bn, from_spec.sync_bn);
}

TEST(Options, DatasetOptionsDefaultAsTheSpec) {
  const data::DatasetOptions own;
  const data::DatasetOptions from_spec = dataset_options(config::DatasetSpec{});
  EXPECT_EQ(own.name, from_spec.name);
  EXPECT_EQ(own.root, from_spec.root);
  EXPECT_EQ(own.train_limit, from_spec.train_limit);
  EXPECT_EQ(own.test_limit, from_spec.test_limit);
  EXPECT_EQ(own.validation, from_spec.validation);
}

TEST(Options, GradReducerOptionsDefaultAsTheSpec) {
  const distributed::GradReducerOptions own;
  const distributed::GradReducerOptions from_spec = grad_reducer_options(config::ReplicasSpec{});
  EXPECT_EQ(own.bucket_mb, from_spec.bucket_mb);
  EXPECT_EQ(own.reduce, from_spec.reduce);
  EXPECT_EQ(own.comm_hook, from_spec.comm_hook);
}

// replicas.grad_dtype and replicas.compression choose one comm hook; compression wins (the spec
// refuses PowerSGD with another grad_dtype).
TEST(Options, GradDtypeAndCompressionChooseOneCommHook) {
  config::ReplicasSpec replicas;
  const std::pair<config::WireDtype, distributed::BuiltinCommHook> cases[] = {
      {config::WireDtype::kFp32, distributed::BuiltinCommHook::kAllreduce},
      {config::WireDtype::kBf16, distributed::BuiltinCommHook::kBf16Compress},
      {config::WireDtype::kFp16, distributed::BuiltinCommHook::kFp16Compress}};
  for (const auto& [dtype, hook] : cases) {
    replicas.grad_dtype = dtype;
    EXPECT_EQ(grad_reducer_options(replicas).comm_hook, hook) << config::name(dtype);
  }
  replicas.compression = config::Compression::kPowerSgd;
  EXPECT_EQ(grad_reducer_options(replicas).comm_hook, distributed::BuiltinCommHook::kPowerSgd);
}

// replicas.powersgd's fields reach PowerSgdOptions, and its defaults are the hook's (PyTorch's).
TEST(Options, PowerSgdSettingsReachTheHooksOptions) {
  config::ReplicasSpec replicas;
  replicas.compression = config::Compression::kPowerSgd;
  const distributed::PowerSgdOptions defaults;
  const auto from_defaults = grad_reducer_options(replicas).powersgd;
  EXPECT_EQ(from_defaults.rank, defaults.rank);
  EXPECT_EQ(from_defaults.start_iter, defaults.start_iter);
  EXPECT_EQ(from_defaults.min_compression_rate, defaults.min_compression_rate);
  EXPECT_EQ(from_defaults.error_feedback, defaults.error_feedback);
  EXPECT_EQ(from_defaults.warm_start, defaults.warm_start);
  EXPECT_EQ(from_defaults.orthogonalization_epsilon, defaults.orthogonalization_epsilon);
  EXPECT_EQ(from_defaults.seed, defaults.seed);
  replicas.powersgd = {4, 10, 1.5, false, false, 1e-8, 4294967295};
  const auto o = grad_reducer_options(replicas);
  EXPECT_EQ(o.comm_hook, distributed::BuiltinCommHook::kPowerSgd);
  EXPECT_EQ(o.powersgd.rank, 4);
  EXPECT_EQ(o.powersgd.start_iter, 10);
  EXPECT_EQ(o.powersgd.min_compression_rate, 1.5);
  EXPECT_FALSE(o.powersgd.error_feedback);
  EXPECT_FALSE(o.powersgd.warm_start);
  EXPECT_EQ(o.powersgd.orthogonalization_epsilon, 1e-8);
  EXPECT_EQ(o.powersgd.seed, 4294967295u);
}

}  // namespace
}  // namespace ddplab::train
