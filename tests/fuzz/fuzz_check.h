// Shared by the libFuzzer targets in tests/fuzz: DDPLAB_FUZZ_CHECK turns a wrong result into a
// crash libFuzzer reports (an uncaught exception other than ddplab::Error aborts by itself).
#pragma once
#include <cstdio>
#include <cstdlib>

#define DDPLAB_FUZZ_CHECK(cond)                                                            \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "fuzz check failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
