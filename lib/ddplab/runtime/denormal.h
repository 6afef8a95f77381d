// Denormal (subnormal) floats flushed to zero: the FTZ and DAZ bits of x86's MXCSR, the switch
// torch.set_flush_denormal(True) turns. x86 cores compute an operation with a denormal input or
// result through a microcode assist many times slower than a normal one, and later epochs of a CPU
// run slowed down with them (docs/performance.md, "Denormal numbers"). Flushed, such a value becomes 0:
// a run's last bits may change, which is why it is a setting (replicas.flush_denormal), off by
// default as in PyTorch.
#pragma once

namespace ddplab::runtime {

// The bits are per thread. FlushDenormalGuard(true) sets them on the calling thread and on every
// thread of its intra-op (OpenMP) pool, which do not take them from it once started; threads the
// calling thread starts afterwards (the process group's, the loader's) take them (POSIX threads
// inherit their creator's floating-point environment). Construct it after at::set_num_threads.
// At its end it clears them on the calling thread and on its pool. FlushDenormalGuard(false)
// changes nothing. Throws ddplab::Error where the CPU cannot flush (not x86, or no DAZ) or LibTorch
// has no OpenMP runtime (denormal.cpp says why it needs one).
class FlushDenormalGuard {
 public:
  explicit FlushDenormalGuard(bool on);
  ~FlushDenormalGuard();
  FlushDenormalGuard(const FlushDenormalGuard&) = delete;
  FlushDenormalGuard& operator=(const FlushDenormalGuard&) = delete;

 private:
  bool on_;
};

}  // namespace ddplab::runtime
