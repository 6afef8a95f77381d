#include "ddplab/runner/run_one.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "ddplab/base/exit_codes.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/data/dataset.h"
#include "ddplab/distributed/endpoint.h"
#include "ddplab/distributed/world.h"
#include "ddplab/launch/hosts.h"
#include "ddplab/launch/launcher.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/live_tensorboard.h"
#include "ddplab/runner/outcome.h"
#include "ddplab/runner/prepare_run.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"

namespace ddplab::runner {
namespace {

using rundir::RunStatus;

bool tee_ranks = false;      // set_tee
HostsRequest hosts_request;  // set_hosts

bool runs_in_this_process(const config::ExperimentSpec& spec) {
  return spec.replicas.count == 1 || spec.replicas.mode == config::ReplicaMode::kSimulated;
}

// The command line of this process that goes on from what this run left, each argument quoted for
// a POSIX shell where it needs it. Without --force, which would throw the checkpoint away.
std::string this_command() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string command;
  for (std::string arg; std::getline(in, arg, '\0');) {
    if (arg == "--force") continue;
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                           "0123456789_-+=.,/:@%") == std::string::npos;
    std::string quoted = "'";
    for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += fmt::format("{}{}", command.empty() ? "" : " ", plain ? arg : quoted + "'");
  }
  return command;
}

// What a stopped run kept and how to go on: "the checkpoint at step 62 (epoch 1, step 62 of
// it) is in DIR; `COMMAND` resumes it", or that it starts over.
std::string stopped_note(const rundir::RunLog& run) {
  const auto mark = rundir::CheckpointMark::of(rundir::read_manifest(run.dir()));
  if (!mark) return fmt::format("no checkpoint was written yet; `{}` starts it over", this_command());
  return fmt::format("the checkpoint at step {} (epoch {}, step {} of it) is in {}; `{}` resumes it", mark->global_step,
                     mark->epochs_done + 1, mark->step_in_epoch, run.dir().string(), this_command());
}

// "ddplab: WHAT; " and the stopped_note, on a line of its own (off the live progress line).
void complain_stopped(const std::string& what, const rundir::RunLog& run) {
  if (::isatty(STDOUT_FILENO) == 1) say("");
  complain("ddplab: {}; {}", what, stopped_note(run));
}

void say_what_runs(const config::ExperimentSpec& spec, const rundir::RunLog& run) {
  const int n = spec.replicas.count;
  say("ddplab: {}/{}: {}{} replica{} x batch {} (global {}), {} epoch{}; logs in {}", spec.name, rundir::run_id(spec),
      n, spec.replicas.mode == config::ReplicaMode::kSimulated ? " simulated" : "", n > 1 ? "s" : "",
      spec.per_replica_batch, spec.global_batch, spec.epochs, spec.epochs == 1 ? "" : "s", run.dir().string());
}

// A run that trained to its end near chance (runner::finished_outcome): says so, not "done".
int say_failed_ending(const Outcome& outcome, const rundir::RunLog& run) {
  complain("ddplab: {}; logs in {}", outcome.message, run.dir().string());
  return outcome.exit_code;
}

int run_in_this_process(const config::ExperimentSpec& spec, const rundir::RunLog& run, const data::DatasetPair& data,
                        bool resume) {
  std::optional<LiveTensorBoard> tensorboard;
  try {
    train::ReplicaOptions options;
    options.run_dir = run.dir();
    options.data = &data;
    options.resume = resume;
    tensorboard.emplace(spec, distributed::World{}, options);
    const StopSignals stop(StopSignals::Second::kDefaultAction);
    auto result = train::train_replica(spec, distributed::World{}, options);
    const Outcome outcome = record_done(run, spec);
    tensorboard->finish(outcome.status);
    if (outcome.status != RunStatus::kDone) return say_failed_ending(outcome, run);
    say("ddplab: done, test accuracy {:g}%; logs in {}", 100 * result.final_test_acc, run.dir().string());
    return kExitOk;
  } catch (const std::exception&) {
    const Outcome outcome = outcome_of(std::current_exception());
    if (tensorboard) tensorboard->finish(outcome.status);
    record(run, outcome);
    if (outcome.status == RunStatus::kFailed) throw;
    if (outcome.status == RunStatus::kInterrupted) {
      complain_stopped(outcome.message, run);
    } else {
      complain("ddplab: {}; logs in {}", outcome.message, run.dir().string());
    }
    return outcome.exit_code;
  }
}

// Records how the launch (its last attempt) ended, and says so.
int finish_launch(const config::ExperimentSpec& spec, const rundir::RunLog& run, const launch::LaunchResult& result) {
  const Outcome outcome = outcome_of(result);
  if (outcome.status == RunStatus::kDone) {
    if (const Outcome ended = record_done(run, spec); ended.status != RunStatus::kDone)
      return say_failed_ending(ended, run);
    const auto last = rundir::last_epoch_record(run.dir());
    say("ddplab: done{}; logs in {}", last ? fmt::format(", test accuracy {:g}%", 100 * last->test_acc) : "",
        run.dir().string());
    return outcome.exit_code;
  }
  if (outcome.status == RunStatus::kDiverged) {
    record(run, outcome);
    complain("ddplab: {}; logs in {}", outcome.message, run.dir().string());
    return outcome.exit_code;
  }
  record(run, outcome);
  if (result.failed_rank >= 0) {
    const auto log = rundir::rank_log_file(run.dir(), result.failed_rank);
    std::error_code ec;
    for (int r = 0; r < spec.replicas.count; ++r) std::filesystem::remove(rundir::rank_error_file(run.dir(), r), ec);
    if (tee_ranks) {  // its lines were shown as they came
      complain("ddplab: {}; the other ranks were stopped; its log is {}", outcome.message, log.string());
    } else {
      fmt::print(stderr, "ddplab: {}; the other ranks were stopped. Last lines of {}:\n{}", outcome.message,
                 log.string(), launch::tail_file(log, 15, fmt::format("[rank {}] ", result.failed_rank)));
    }
    std::fflush(stderr);
  } else {
    complain_stopped(fmt::format("{}; all ranks stopped", outcome.message), run);
  }
  return outcome.exit_code;
}

// Where the ranks of a run of `nproc` processes go (set_hosts); empty: this host.
launch::HostPlacement placement(int nproc) {
  launch::HostPlacement p;
  if (hosts_request.hostfile.empty()) return p;
  const auto hosts = launch::read_hostfile(hosts_request.hostfile);
  p.rank_hosts = launch::place_ranks(hosts, nproc, hosts_request.hostfile);
  p.remote = hosts_request.remote;
  p.master_addr =
      !hosts_request.master_addr.empty()
          ? hosts_request.master_addr
          : distributed::choose_endpoints(hosts.front().host, distributed::process_environment(), 0).front().address;
  return p;
}

int run_launched(const config::ExperimentSpec& spec, rundir::RunLog run, bool resume) {
  launch::LaunchOptions options;
  options.nproc = spec.replicas.count;
  options.run_dir = run.dir();
  options.spec_path = rundir::spec_file(run.dir()).string();
  options.timeout_s = spec.replicas.timeout_s;
  options.resume = resume;
  options.tee = tee_ranks;
  options.hosts = placement(spec.replicas.count);
  auto result = launch::launch_workers(options);
  // replicas.max_restarts: a failed rank stops all; they start again from the last checkpoint.
  for (int restart = 1; restart <= spec.replicas.max_restarts; ++restart) {
    const Outcome outcome = outcome_of(result);
    if (outcome.status != RunStatus::kFailed) break;
    complain("ddplab: {}; restart {} of {}", outcome.message, restart, spec.replicas.max_restarts);
    auto again = rundir::RunLog::resume(spec, outcome.message);
    if (!again) {
      complain("ddplab: no checkpoint yet; starting over");
      run = rundir::RunLog::create(spec, true);
    }
    options.resume = again.has_value();
    options.restart_count = restart;
    result = launch::launch_workers(options);
  }
  return finish_launch(spec, run, result);
}

}  // namespace

void set_tee(bool tee) { tee_ranks = tee; }

void set_hosts(const HostsRequest& hosts) { hosts_request = hosts; }

int run_one(const config::ExperimentSpec& spec, bool force) {
  // An unfinished run with a checkpoint continues where it stopped, unless --force.
  RunStart start;
  start.resume = !force;
  start.resume_reason = "ddplab run again";
  start.replace = force;
  const PreparedRun run = prepare_run(spec, start);
  if (run.resumed) say("ddplab: resuming {} from its checkpoint (--force starts over)", run.log.dir().string());
  say_what_runs(spec, run.log);
  if (runs_in_this_process(spec)) return run_in_this_process(spec, run.log, run.data, run.resumed);
  return run_launched(spec, run.log, run.resumed);
}

}  // namespace ddplab::runner
