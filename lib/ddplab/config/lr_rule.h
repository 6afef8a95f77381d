// The learning-rate scaling rule, schedule.scale_rule: the factor on optimizer.lr at a global
// batch, k = global_batch / base_batch: none 1, linear k, sqrt sqrt(k). The trainer's schedule
// (train/lr_schedule.h) and the planner's lr flag (plan/plan.h) both take it from here.
#pragma once
#include "ddplab/config/settings.h"

namespace ddplab::config {

double lr_scale(ScaleRule rule, double global_batch, double base_batch);

}  // namespace ddplab::config
