// Must not compile: config is below train, so train's headers are not on config's include path.
// tests/CMakeLists.txt builds this file as part of ddplab_config and expects the missing header.
#include "ddplab/train/trainer.h"
