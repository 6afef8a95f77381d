#include "ddplab/runtime/denormal.h"

#include <dlfcn.h>

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

void set_on_pool(bool on) {
  static const auto gomp_parallel = reinterpret_cast<GompParallel>(::dlsym(RTLD_DEFAULT, "GOMP_parallel"));
  if (gomp_parallel == nullptr)
    throw Error("replicas.flush_denormal: this LibTorch has no OpenMP runtime (GOMP_parallel) through which to "
                "reach its intra-op threads");
  gomp_parallel(&set_on_this_thread, &on, 0, 0);
}

}  // namespace

FlushDenormalGuard::FlushDenormalGuard(bool on) : on_(on) {
  if (!on_) return;
  if (!at::globalContext().setFlushDenormal(true))
    throw Error("replicas.flush_denormal: this CPU cannot flush denormal numbers to zero (it takes x86 with DAZ)");
  try {
    set_on_pool(true);
  } catch (...) {
    at::globalContext().setFlushDenormal(false);
    throw;
  }
}

FlushDenormalGuard::~FlushDenormalGuard() {
  if (on_) set_on_pool(false);
}

}  // namespace ddplab::runtime
