// replicas.prewarm_steps: the first call of each kernel a run makes, made before its training
// clock starts. On a GPU the first call pays for what later calls find ready: CUDA loads a
// kernel's module on its first launch (lazy loading), cuDNN and cuBLAS make their handles, plans
// and workspaces, the caching allocator asks the driver for its first blocks. In the first GPU run
// (docs/performance.md) that made epoch 1 0.45-0.8 s longer than epoch 2. A
// benchmark timed in a warm process (a notebook's %timeit, a loop over seeds in one process) has
// paid it before its clock starts; a run of ddplab is a fresh process. The time the prewarm takes
// falls in start-up, which the console reports with the prewarm's own seconds.
//
// The passes change nothing a run records: their gradients are taken by autograd::grad (no .grad
// is written, no GradReducer hook fires, no optimizer steps), and the module buffers (BatchNorm's
// running statistics and batch counts) and the dropout generator's state are put back after them
// (a TorchScript module's other state, such as a counter its forward keeps, is not).
#pragma once
#include <cstdint>

#include "ddplab/train/evaluate.h"
#include "ddplab/train/faults.h"
#include "ddplab/train/network.h"

namespace ddplab::train {

// `steps` training-mode forward and backward passes of `net` on a batch of zeros of `batch`
// samples shaped as the model's input (zero labels; loss as `faults` says; under bf16 autocast
// when `bf16`), then one evaluation forward of the first 1000 samples of `test` (or all of them
// if fewer). Returns the seconds it took, the device synchronized. Leaves the model in eval mode.
// Under model.sync_bn with 2+ processes the training forwards all-reduce: every rank must call
// this with the same `steps`.
double prewarm(Network& net, const EvalSplit& test, int64_t batch, int steps, const DebugFaults& faults, bool bf16);

}  // namespace ddplab::train
