// Must not compile: plan is below runner (runner runs the calibration sweep and links plan), so
// runner's headers are not on plan's include path. tests/CMakeLists.txt builds this file as part of
// ddplab_plan and expects the missing header.
#include "ddplab/runner/sweep.h"
