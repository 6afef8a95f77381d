#include "ddplab/data/validation.h"

#include <set>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"

namespace ddplab::data {
namespace {

// n samples; sample i has label labels[i % labels.size()] and its index in its first pixel bytes.
Dataset indexed(int64_t n, const std::vector<int64_t>& labels) {
  Dataset d;
  d.images = torch::zeros({n, 1, 2, 2}, torch::kUInt8);
  d.labels = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    d.images[i][0][0][0] = i % 256;
    d.images[i][0][0][1] = i / 256;
    d.labels[i] = labels[static_cast<size_t>(i % static_cast<int64_t>(labels.size()))];
  }
  return d;
}

std::vector<int64_t> indices_of(const Dataset& d) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < d.size(); ++i)
    out.push_back(d.images[i][0][0][0].item<int64_t>() + 256 * d.images[i][0][0][1].item<int64_t>());
  return out;
}

std::vector<int64_t> class_counts(const Dataset& d, int64_t classes) {
  const auto c = torch::bincount(d.labels, {}, classes).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

std::string error_of(double validation, int64_t n) {
  try {
    validation_count(validation, n);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Validation, AFractionBelowOneIsAShareAndAWholeNumberIsACount) {
  EXPECT_EQ(validation_count(0, 1000), 0);
  EXPECT_EQ(validation_count(0.1, 1000), 100);
  EXPECT_EQ(validation_count(0.1005, 1000), 101);  // rounded
  EXPECT_EQ(validation_count(250, 1000), 250);
  EXPECT_EQ(error_of(2.5, 1000),
            "/dataset/validation: 2.5 is neither a fraction below 1 nor a whole number of samples");
  EXPECT_EQ(error_of(1000, 1000),
            "/dataset/validation: holds out 1000 of the 1000 training samples; it must keep at least one of each part");
  EXPECT_EQ(error_of(0.0001, 1000),
            "/dataset/validation: holds out 0 of the 1000 training samples; it must keep at least one of each part");
}

// Classes of 600, 300 and 100 samples and a split of 100: 60, 30 and 10 of them; the two parts
// partition the set and each keeps the training set's order.
TEST(Validation, TheSplitIsStratifiedAndPartitionsTheSetInOrder) {
  const Dataset train = indexed(1000, {0, 0, 0, 0, 0, 0, 1, 1, 1, 2});
  const auto [kept, held] = split_validation(train, 100, 3);
  ASSERT_EQ(held.size(), 100);
  ASSERT_EQ(kept.size(), 900);
  EXPECT_EQ(class_counts(held, 3), (std::vector<int64_t>{60, 30, 10}));
  const auto a = indices_of(kept), b = indices_of(held);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  std::set<int64_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 1000u);
  for (int64_t i = 0; i < held.size(); ++i)
    EXPECT_EQ(held.labels[i].item<int64_t>(), train.labels[b[static_cast<size_t>(i)]].item<int64_t>());
}

// Quotas that do not divide evenly sum to the count (largest remainders); the split is the same
// every time (it takes no seed) and not simply the first samples of each class.
TEST(Validation, QuotasSumToTheCountAndTheSplitIsFixedButNotTheFirstSamples) {
  const Dataset train = indexed(101, {0, 1, 2});  // 34, 34, 33
  const auto [kept, held] = split_validation(train, 10, 3);
  EXPECT_EQ(held.size(), 10);
  EXPECT_EQ(class_counts(held, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(indices_of(split_validation(train, 10, 3).second), indices_of(held));
  const auto b = indices_of(held);
  EXPECT_NE(b, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

}  // namespace
}  // namespace ddplab::data
