// Denormal (subnormal) floats flushed to zero: the FTZ and DAZ bits of x86's MXCSR, the switch
// torch.set_flush_denormal(True) turns. x86 cores compute an operation with a denormal input or
// result through a microcode assist many times slower than a normal one; flushed, the later epochs
// of a CPU run ran faster (docs/performance.md, "Denormal numbers"). Flushed, such a value becomes 0:
// a run's last bits may change, which is why it is a setting (replicas.flush_denormal), off by
// default as in PyTorch.
#pragma once

namespace ddplab::runtime {

// The bits are per thread. FlushDenormalGuard(true) sets them on the calling thread and on every
// thread of its intra-op (OpenMP) pool, which do not take them from it once started; threads the
// calling thread starts afterwards (a process group's, the loader's) take them (POSIX threads
// inherit their creator's floating-point environment), so construct it before those and after
// at::set_num_threads. At its end it clears them on the calling thread and its pool, unless the
// calling thread flushed already when it began (an outer guard's): guards nest. Threads started
// meanwhile keep them. FlushDenormalGuard(false) changes nothing. Throws ddplab::Error where
// LibTorch cannot set them on this CPU (at::Context::setFlushDenormal says false: x86 without DAZ,
// or a CPU that is neither x86 nor ARM) or has no OpenMP runtime (denormal.cpp says why it needs one).
class FlushDenormalGuard {
 public:
  explicit FlushDenormalGuard(bool on);
  ~FlushDenormalGuard();
  FlushDenormalGuard(const FlushDenormalGuard&) = delete;
  FlushDenormalGuard& operator=(const FlushDenormalGuard&) = delete;

  // Whether the calling thread flushes denormals now (a denormal times 1 gives 0).
  static bool flushing();

 private:
  bool clear_at_end_ = false;
};

}  // namespace ddplab::runtime
