#include "ddplab/config/lr_rule.h"

#include <cmath>

namespace ddplab::config {

double lr_scale(ScaleRule rule, double global_batch, double base_batch) {
  const double k = global_batch / base_batch;
  switch (rule) {
    case ScaleRule::kNone:
      return 1.0;
    case ScaleRule::kLinear:
      return k;
    case ScaleRule::kSqrt:
      return std::sqrt(k);
  }
  return 1.0;
}

}  // namespace ddplab::config
