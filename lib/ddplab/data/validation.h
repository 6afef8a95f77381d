// The validation split (dataset.validation): a part of the training set held out, never trained
// on, evaluated every epoch like the test set, so that choices (the best epoch, early stopping,
// best.pt, a time to target) are made on it and the test set is read once, for the epoch it chose.
//
// The split is stratified and fixed: class c of n_c samples gives round(k * n_c / n) of them
// (largest remainders, so the quotas sum to k), picked by a permutation of the class's samples
// drawn from a generator with a constant seed (kValidationSeed). It depends on the training
// set alone, not on the run's seed, the replica count or the batch: every run of a sweep holds
// out the same samples. Both parts keep the training set's order.
#pragma once
#include <cstdint>
#include <utility>

#include "ddplab/data/dataset.h"

namespace ddplab::data {

// The seed of the class permutations: a constant, so the split is part of the dataset.
inline constexpr uint64_t kValidationSeed = 20261205;

// How many of `train_size` samples dataset.validation `validation` holds out: a fraction of the
// set when below 1, else a count (a whole number). 0: none. Throws ddplab::Error naming
// /dataset/validation when the count is not whole or leaves no training sample.
int64_t validation_count(double validation, int64_t train_size);

// {what is trained on, the held-out samples} of `train` for a split of `count` samples
// (0 < count < train.size()), labels in [0, num_classes).
std::pair<Dataset, Dataset> split_validation(const Dataset& train, int64_t count, int64_t num_classes);

}  // namespace ddplab::data
