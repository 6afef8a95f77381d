// A packed sweep: `ddplab run sweep.json --jobs N` (and/or --cores C, --gpus G) runs several of
// the sweep's runs at once on this machine, within a budget (scheduler.h: what each run needs,
// longest first).
//
// Each run is a child process, `ddplab run <experiment>/sweep/<run-id>.json --run-id <run-id>`
// (+ --force when it starts over), started in its own process group with its console output in
// <experiment>/sweep/<run-id>.log (rundir/layout.h). The .json is the run's spec as this
// process resolved it for the sweep, so a run's spec, and with it its metrics, is the same
// whether the sweep is packed or runs in turn. The child is `ddplab run` of one spec: its own run
// directory and rank logs, and, for replicas.count > 1 processes, its own launcher and TCPStore at
// a port the OS picks (launch/launcher.h), so concurrent runs never share a rendezvous port. A
// CUDA run gets the GPUs it holds as CUDA_VISIBLE_DEVICES (its ranks see them as 0..count-1).
//
// The skip/resume policy is the sequential sweep's (sweep.h): done/diverged runs are skipped
// unless --force, an unfinished run with a checkpoint resumes, any other starts over. A run that
// fails (or is killed by a signal this process did not send) is counted and the others go on; a
// run that stops cleanly on a signal sent to it alone (exit 130/143) lets the others finish but
// starts no new run, as an interrupted run stops a sequential sweep.
// SIGINT/SIGTERM is passed on to every running run (each checkpoints and exits 130/143; a second
// signal is passed on too, and stops them at once); no new run starts; the exit code is 128 +
// signal, and the same command resumes the interrupted runs. Children get PR_SET_PDEATHSIG
// SIGTERM, so a killed sweep still stops them cleanly.
//
// Output: one line per event when stdout is not a terminal: "[3/8] started ID (1 core; 2
// running, ETA 1:10)", "[3/8] ID: epoch 1/2, test acc 81.20%", "[3/8] done ID: test acc 84.10%
// in 0:12", "[3/8] failed ID: <why>; its console output: <log>". On a terminal the same events
// (without the epoch lines) scroll above a live table of the running runs (run, state, epoch,
// test accuracy, ETA), redrawn twice a second. At the end the sweep's summary (sweep.h) and a
// line on how long it took and how busy the budget was: cores held (core-seconds the runs held
// / cores x wall time), the CPU time the runs used (their rusage, workers included) over the
// same, and GPUs held when the budget has GPUs.
#pragma once
#include <vector>

#include "ddplab/config/sweep.h"
#include "ddplab/runner/scheduler.h"

namespace ddplab::runner {

// The budget of `options` on this machine (its cores; the visible GPUs, CUDA_VISIBLE_DEVICES or
// the CUDA device count); throws Error (check_fits) when a run that would run (not skipped)
// needs more than the whole budget, before anything is written.
Budget packing_budget(const std::vector<config::SweepRun>& runs, bool force, const PackOptions& options);

// Runs the sweep `runs` packed; returns the sweep's exit code (sweep.h).
int run_packed(const std::vector<config::SweepRun>& runs, bool force, const PackOptions& options);

}  // namespace ddplab::runner
