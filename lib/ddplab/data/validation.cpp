#include "ddplab/data/validation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/config/spec_error.h"

namespace ddplab::data {
namespace {

// Quotas proportional to `sizes` that sum to `count`: floors, then one more to the largest
// remainders (the lower class first on a tie).
std::vector<int64_t> class_quotas(const std::vector<int64_t>& sizes, int64_t count, int64_t total) {
  std::vector<int64_t> quota(sizes.size());
  std::vector<int64_t> remainder(sizes.size());
  int64_t given = 0;
  for (size_t c = 0; c < sizes.size(); ++c) {
    quota[c] = count * sizes[c] / total;
    remainder[c] = count * sizes[c] % total;
    given += quota[c];
  }
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t k = 0; given < count; ++k, ++given) ++quota[order[k % order.size()]];
  return quota;
}

Dataset select(const Dataset& set, const at::Tensor& indices) {
  return {set.images.index_select(0, indices).contiguous(), set.labels.index_select(0, indices).contiguous()};
}

}  // namespace

int64_t validation_count(double validation, int64_t train_size) {
  if (validation <= 0) return 0;
  const int64_t count =
      validation < 1 ? std::llround(validation * static_cast<double>(train_size)) : static_cast<int64_t>(validation);
  if (validation >= 1 && static_cast<double>(count) != validation)
    throw config::spec_error("/dataset/validation",
                             fmt::format("{} is neither a fraction below 1 nor a whole number of samples", validation));
  if (count < 1 || count >= train_size)
    throw config::spec_error("/dataset/validation",
                             fmt::format("holds out {} of the {} training samples; it must keep at least one of "
                                         "each part",
                                         count, train_size));
  return count;
}

std::pair<Dataset, Dataset> split_validation(const Dataset& train, int64_t count, int64_t num_classes) {
  const int64_t n = train.size();
  TORCH_INTERNAL_ASSERT(count > 0 && count < n, "validation count ", count, " of ", n);
  const auto labels = train.labels.contiguous();
  const int64_t* label = labels.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < n; ++i) by_class[static_cast<size_t>(label[i])].push_back(i);
  std::vector<int64_t> sizes;
  for (const auto& members : by_class) sizes.push_back(static_cast<int64_t>(members.size()));
  const std::vector<int64_t> quota = class_quotas(sizes, count, n);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(kValidationSeed);
  std::vector<bool> held(static_cast<size_t>(n), false);
  for (size_t c = 0; c < by_class.size(); ++c) {
    if (by_class[c].empty()) continue;
    const auto perm = torch::randperm(sizes[c], generator, torch::kInt64);
    const int64_t* p = perm.data_ptr<int64_t>();
    for (int64_t k = 0; k < quota[c]; ++k) held[static_cast<size_t>(by_class[c][static_cast<size_t>(p[k])])] = true;
  }
  std::vector<int64_t> kept, out;
  for (int64_t i = 0; i < n; ++i) (held[static_cast<size_t>(i)] ? out : kept).push_back(i);
  return {select(train, torch::tensor(kept, torch::kInt64)), select(train, torch::tensor(out, torch::kInt64))};
}

}  // namespace ddplab::data
