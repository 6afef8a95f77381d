#include "ddplab/runtime/denormal.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>

#include <ATen/Context.h>

#include "ddplab/base/error.h"

namespace ddplab::runtime {
namespace {

// ddplab is compiled without -fopenmp (a second OpenMP runtime would be a second thread pool), so
// at::parallel_for in its own code runs serially (ATen/Parallel-inl.h without _OPENMP). To run code
// once on every thread of the calling thread's pool, it enters a parallel region through the entry
// point `#pragma omp parallel` compiles to, GOMP_parallel, of the runtime LibTorch loaded (its
// libgomp; Intel's libiomp5 exports it too). Team size 0: the size at::set_num_threads set, as
// ATen's own regions take it, so the same pool threads run it.
using GompParallel = void (*)(void (*)(void*), void*, unsigned num_threads, unsigned flags);

void set_on_this_thread(void* on) { at::globalContext().setFlushDenormal(*static_cast<const bool*>(on)); }

GompParallel gomp_parallel() {
  static const auto entry = reinterpret_cast<GompParallel>(::dlsym(RTLD_DEFAULT, "GOMP_parallel"));
  return entry;
}

void set_on_pool(bool on) { gomp_parallel()(&set_on_this_thread, &on, 0, 0); }

}  // namespace

bool FlushDenormalGuard::flushing() {
  // The compiler does not model MXCSR: volatile keeps the product at run time, and its bits are
  // tested, not its value (a float compare placed after the constructor sets DAZ would read a
  // denormal as 0).
  volatile float denormal = 1e-39f;
  volatile float one = 1.0f;
  const float product = denormal * one;
  uint32_t bits = 0;
  std::memcpy(&bits, &product, sizeof bits);
  return bits == 0;
}

FlushDenormalGuard::FlushDenormalGuard(bool on) {
  if (!on) return;
  const bool was_flushing = flushing();
  if (!at::globalContext().setFlushDenormal(true))
    throw Error("replicas.flush_denormal: LibTorch cannot flush denormal numbers to zero on this CPU");
  if (gomp_parallel() == nullptr) {
    at::globalContext().setFlushDenormal(was_flushing);
    throw Error(
        "replicas.flush_denormal: this LibTorch has no OpenMP runtime (GOMP_parallel) through which to "
        "reach its intra-op threads");
  }
  set_on_pool(true);
  clear_at_end_ = !was_flushing;
}

FlushDenormalGuard::~FlushDenormalGuard() {
  if (clear_at_end_) set_on_pool(false);
}

}  // namespace ddplab::runtime
