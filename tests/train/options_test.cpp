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
  EXPECT_EQ(own.mean, from_spec.mean);
  EXPECT_EQ(own.compress_bf16, from_spec.compress_bf16);
}

}  // namespace
}  // namespace ddplab::train
