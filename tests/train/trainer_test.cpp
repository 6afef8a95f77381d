#include "ddplab/train/trainer.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ddplab::train {
namespace {

TEST(Trainer, LossFarAboveAUniformGuessHasBlownUp) {
  const double ln10 = std::log(10.0);
  EXPECT_FALSE(loss_has_blown_up(ln10, 10)) << "a uniform guess is where training starts";
  EXPECT_FALSE(loss_has_blown_up(20 * ln10, 10)) << "a bad but recoverable epoch";
  EXPECT_TRUE(loss_has_blown_up(570.6, 10)) << "measured: mnist_cnn at lr 0.5, epoch 1";
  EXPECT_TRUE(loss_has_blown_up(std::numeric_limits<double>::infinity(), 10));
  EXPECT_TRUE(loss_has_blown_up(std::nan(""), 10));
  EXPECT_FALSE(loss_has_blown_up(300, 100)) << "the bound grows with ln(classes): 100 x ln(100) = 460";
}

}  // namespace
}  // namespace ddplab::train
