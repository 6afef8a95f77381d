// The scheduling of a packed sweep (`ddplab run sweep.json --jobs N | --cores C | --gpus G`),
// as pure functions and one small pool, so it can be tested without running anything; pack.h
// runs the runs.
//
// Resource model, per run (needs_of):
//   device cuda, mode processes   replicas.count GPUs (NCCL needs one per rank), no cores
//   device cuda, mode simulated   1 GPU
//   device cpu,  mode processes   replicas.count x replicas.threads cores
//   device cpu,  mode simulated   replicas.threads cores (one process)
// The budget (Budget) is at most `jobs` runs at once (0: no limit), `cores` cores and the GPUs
// `gpus` (their CUDA_VISIBLE_DEVICES names); runs never take more than it. A run whose needs
// exceed the whole budget is an Error naming the run and what it needs (check_fits).
//
// Order: longest-processing-time first. work_estimate(spec) = epochs x training samples / the
// run's parallel units (its cores on CPU, its GPUs on CUDA), i.e. in sample-epochs per unit, a
// stand-in for its wall time; the samples are dataset.train_limit, else the dataset's size
// (60,000 for the MNIST family and for idx files, whose size is not read; 50,000 for CIFAR).
// longest_first sorts by that, descending; ties by larger needs, then in the sweep's run order
// (run_order in sweep.h). A pending run
// starts as soon as its needs fit into what is free (first fit in that order, so a small run may
// start while a larger one waits for more room).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/config/spec.h"

namespace ddplab::runner {

struct Needs {
  int cores = 0;
  int gpus = 0;
};

Needs needs_of(const config::ExperimentSpec& spec);

// "2 cores (replicas.count 2 x replicas.threads 1)", "4 GPUs (replicas.count 4, device cuda)".
std::string describe_needs(const config::ExperimentSpec& spec);

double work_estimate(const config::ExperimentSpec& spec);

// Indices of `estimates` (with the runs' `needs`, same length), longest first, as above; equal
// runs keep their order in `ties` (a permutation of the indices; empty: 0, 1, 2, ...).
std::vector<size_t> longest_first(const std::vector<double>& estimates, const std::vector<Needs>& needs,
                                  std::vector<size_t> ties = {});

// What the command line asked for; 0 / -1: not given.
struct PackOptions {
  int jobs = 0;   // --jobs: at most this many runs at once (0: not given)
  int cores = 0;  // --cores: CPU cores for CPU runs (0: not given: the machine's cores)
  int gpus = -1;  // --gpus: GPUs for CUDA runs (-1: not given: the visible GPUs)

  // Whether any of the three was given: the sweep is packed (else it runs in turn, in-process).
  bool packed() const { return jobs > 0 || cores > 0 || gpus >= 0; }
};

struct Budget {
  int jobs = 0;  // 0: no limit
  int cores = 1;
  std::vector<std::string> gpus;  // CUDA_VISIBLE_DEVICES names, e.g. {"0", "1"}
};

// The GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES (`visible`, "0,2,3") when
// set, else "0" .. "<device_count - 1>".
std::vector<std::string> visible_gpus(const char* cuda_visible_devices, int device_count);

// The budget of `options` on a machine with `machine_cores` cores and the GPUs `visible`.
// --gpus G takes the first G of `visible`; G larger than that is an Error, as are --jobs,
// --cores below 0.
Budget budget_of(const PackOptions& options, int machine_cores, const std::vector<std::string>& visible);

// Throws Error when the needs of `spec` (run `run_id`) exceed the whole `budget`:
// "run replicas.count=4,seed=1 needs 4 cores (replicas.count 4 x replicas.threads 1), more than
// the budget's 2 (--cores); ...".
void check_fits(const std::string& run_id, const config::ExperimentSpec& spec, const Budget& budget);

// What a started run holds of the budget.
struct Allocation {
  int cores = 0;
  std::vector<std::string> gpus;  // the run's CUDA_VISIBLE_DEVICES, in order
};

// The free part of a budget: runs take from it and give back what they took. GPUs are handed
// out lowest first, so two runs never share one.
class Pool {
 public:
  explicit Pool(Budget budget);
  // What `needs` gets, or nothing when it does not fit now (or `jobs` runs are running).
  std::optional<Allocation> take(const Needs& needs);
  void give_back(const Allocation& allocation);
  int running() const { return running_; }
  const Budget& budget() const { return budget_; }

 private:
  Budget budget_;
  int free_cores_;
  std::vector<bool> gpu_free_;
  int running_ = 0;
};

// The first of `order` whose `pending[i]` is true and whose needs fit into `pool` now: takes
// them and returns (index, allocation); nothing when none fits.
std::optional<std::pair<size_t, Allocation>> start_next(const std::vector<size_t>& order,
                                                        const std::vector<bool>& pending,
                                                        const std::vector<Needs>& needs, Pool& pool);

// How busy the budget was: `used` unit-seconds (cores or GPUs held x seconds) over `units` x
// `wall_s`, in percent; 0 when either is 0.
double busy_percent(double used, int units, double wall_s);

}  // namespace ddplab::runner
