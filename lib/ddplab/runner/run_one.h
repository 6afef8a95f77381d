// One run of one spec, as `ddplab run` of a spec without sweep keys does it:
//
//  1. The data are read and the model built before anything is written: a missing or corrupt
//     file, or a spec that does not fit the data or the model, is a user error (ddplab::Error)
//     and leaves no run directory (prepare_run.h, shared with `ddplab worker`).
//  2. An unfinished run with a checkpoint in the run directory continues from it, unless `force`;
//     otherwise a new run directory is made (an existing run there needs `force`).
//  3. One replica, or N simulated ones (replicas.mode "simulated"), train in this process; N
//     replicas of mode "processes" are N workers started by launch::launch_workers. When a rank
//     fails, all ranks start again from the last checkpoint, up to replicas.max_restarts times.
//     Ranks 1..N-1 print to their log files only; when a rank fails, the end of its log is printed
//     with each line prefixed "[rank <r>] ". With set_tee(true) every rank's lines come to the
//     console as they are written, prefixed so (launch/rank_output.h).
//  4. How it ended goes to the manifest and becomes the exit code (outcome.h). A run in this
//     process that fails with an exception is recorded as failed and the exception rethrown.
#pragma once
#include <string>

#include "ddplab/config/spec.h"

namespace ddplab::runner {

// Runs `spec`; returns the exit code (base/exit_codes.h).
int run_one(const config::ExperimentSpec& spec, bool force);

// `ddplab run --tee`: every rank of the multi-process runs this process launches prints to the
// console too (launch::LaunchOptions::tee). One setting for the whole process, as its console is.
void set_tee(bool tee);

// `ddplab run --hosts FILE [--remote CMD] [--master-addr A]`: the multi-process runs this process
// launches place their ranks on the hosts of FILE (launch/hosts.h), started by CMD (default
// "ssh {host}"); A is where they reach the store (default: this machine's address on the route
// to the first host). Runs of one process still run here. One setting for the whole process.
struct HostsRequest {
  std::string hostfile;  // "": every rank on this host
  std::string remote = "ssh {host}";
  std::string master_addr;
};
void set_hosts(const HostsRequest& hosts);

}  // namespace ddplab::runner
