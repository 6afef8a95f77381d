#include "ddplab/runner/sweep.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/sweep.h"
#include "ddplab/data/dataset.h"
#include "ddplab/report/report.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/outcome.h"
#include "ddplab/runner/pack.h"
#include "ddplab/runner/run_one.h"
#include "ddplab/runner/sweep_steps.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"

namespace fs = std::filesystem;

namespace ddplab::runner {

using rundir::RunStatus;

bool skips_run(std::optional<RunStatus> status, bool force) { return !force && status && rundir::is_finished(*status); }

RunStart run_start(bool resumable, bool force) {
  return !force && resumable ? RunStart::kResume : RunStart::kStartOver;
}

Tally tally_of(int exit_code, std::optional<RunStatus> status) {
  if (exit_code == kExitOk) return Tally::kDone;
  if (is_signal_exit_code(exit_code) || status == RunStatus::kInterrupted) return Tally::kInterrupted;
  if (status == RunStatus::kDiverged) return Tally::kDiverged;
  if (status == RunStatus::kCollapsed) return Tally::kCollapsed;
  return Tally::kFailed;
}

std::string failure_reason(const std::string& exception_message, const std::string& manifest_message, int exit_code) {
  if (!exception_message.empty()) return exception_message;
  if (!manifest_message.empty()) return manifest_message;
  return fmt::format("exit code {}", exit_code);
}

void SweepTally::count(Tally tally, int exit_code, const std::string& run_id, const std::string& reason) {
  ++ran;
  switch (tally) {
    case Tally::kDone:
      ++done;
      break;
    case Tally::kDiverged:
      ++diverged;
      break;
    case Tally::kCollapsed:
      ++collapsed;
      break;
    case Tally::kFailed:
      failures.emplace_back(run_id, reason);
      break;
    case Tally::kInterrupted:
      // A run stopped by a signal that its exit code does not tell (e.g. one that failed while
      // stopping) stops the sweep as Ctrl-C would.
      stop_code = is_signal_exit_code(exit_code) ? exit_code : exit_code_for_signal(SIGINT);
      break;
  }
}

int sweep_exit_code(const SweepTally& tally) {
  if (tally.stopped()) return tally.stop_code;
  return tally.failures.empty() ? kExitOk : kExitFailure;
}

std::string sweep_summary(const std::string& name, const SweepTally& t) {
  std::string line =
      fmt::format("ddplab: sweep {}: {} done, {} skipped, {} failed", name, t.done, t.skipped, t.failures.size());
  if (t.diverged > 0) line += fmt::format(", {} diverged", t.diverged);
  if (t.collapsed > 0) line += fmt::format(", {} collapsed", t.collapsed);
  if (t.stopped()) line += fmt::format(", stopped after {} of {}", t.ran + t.skipped, t.runs);
  return line;
}

namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

void shuffle_in_place(std::vector<size_t>& items, uint64_t seed) {
  std::mt19937_64 draw(seed);
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[draw() % i]);
}

}  // namespace

std::vector<size_t> run_order(const std::vector<config::SweepRun>& runs) {
  std::map<std::string, size_t> arm_of;  // the swept values but the seed -> arm index
  std::vector<std::vector<size_t>> arms;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto values = runs[i].assignments;
    values.erase("seed");
    const auto [it, added] = arm_of.try_emplace(values.dump(), arms.size());
    if (added) arms.emplace_back();
    arms[it->second].push_back(i);
  }
  const uint64_t name_hash = runs.empty() ? 0 : fnv1a(runs.front().spec.name);
  std::vector<size_t> order;
  for (size_t round = 0; order.size() < runs.size(); ++round) {
    std::vector<size_t> in_round;
    for (size_t a = 0; a < arms.size(); ++a)
      if (round < arms[a].size()) in_round.push_back(a);
    shuffle_in_place(in_round, name_hash ^ (round + 1));
    for (size_t a : in_round) order.push_back(arms[a][round]);
  }
  return order;
}

int check_before_running(const std::vector<config::SweepRun>& runs) {
  std::map<std::string, std::optional<data::DatasetPair>> loaded;  // by the dataset section; nullopt: failed
  int code = kExitOk;
  for (const auto& run : runs) {
    const std::string prefix = runs.size() > 1 ? run.run_id + ": " : "";
    const std::string key = run.spec.resolved["dataset"].dump();
    try {
      if (!loaded.count(key)) {
        loaded[key] = std::nullopt;
        loaded[key] = data::load_dataset(train::dataset_options(run.spec.dataset));
      }
      if (loaded[key]) train::check_setup(run.spec, *loaded[key]);
    } catch (const Error& e) {
      complain("ddplab: {}{}", prefix, e.what());
      code = kExitUserError;
    }
  }
  return code;
}

namespace {

// --dry-run: the runs, what each changes and whether it would be skipped; then the data files.
int dry_run(const nlohmann::json& doc, const std::vector<config::SweepRun>& runs, const std::string& path, bool force) {
  const bool sweep = config::has_sweep(doc);
  const size_t n = runs.size();
  nlohmann::json base = runs.front().spec.resolved;
  try {
    base = config::resolve(config::fields_kept(doc, config::in_run_spec), path).resolved;
  } catch (const Error&) {
  }
  say("ddplab: {}: {} run{} in the order they would run (dry run: nothing is run or written)", runs.front().spec.name,
      n, n == 1 ? "" : "s");
  const auto order = run_order(runs);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    const auto changes =
        force ? std::vector<std::string>{} : rundir::spec_changes(rundir::run_dir(runs[i].spec), runs[i].spec);
    const char* note = !changes.empty() ? "  (changed: holds a run of another spec; --force replaces it)"
                       : !skips_run(status_unless_forced(runs[i], force), force) ? ""
                       : sweep                                                   ? "  (done: would be skipped)"
                                                                                 : "  (done: --force runs it again)";
    std::string lines = fmt::format("[{}/{}] {}{}", k + 1, n, runs[i].run_id, note);
    for (const auto& line : changes) lines += fmt::format("\n    changed {}", line);
    for (const auto& line : config::resolved_differences(base, runs[i].spec.resolved))
      lines += fmt::format("\n    {}", line);
    say("{}", lines);
  }
  return check_before_running(runs);
}

// Runs one run of the sweep (resumed or started over, run_start) and counts it.
void run_and_count(const config::SweepRun& run, bool force, SweepTally& tally) {
  const fs::path dir = rundir::run_dir(run.spec);
  int code = kExitOk;
  std::string reason;
  try {
    // An unfinished run with a checkpoint continues from it (as a plain `ddplab run` does);
    // any other unfinished run starts over in a fresh directory.
    const bool start_over = run_start(!force && rundir::holds_resumable_run(dir), force) == RunStart::kStartOver;
    code = run_one(run.spec, start_over);
  } catch (const std::exception&) {
    const Outcome outcome = outcome_of(std::current_exception());
    code = outcome.exit_code;
    reason = outcome.message;
    complain("ddplab: {} failed: {}", run.run_id, reason);
  }
  const auto [status, message] = manifest_after(dir);
  const Tally t = tally_of(code, status);
  tally.count(t, code, run.run_id, t == Tally::kFailed ? failure_reason(reason, message, code) : "");
}

int run_all(const std::vector<config::SweepRun>& runs, bool force) {
  const std::string& name = runs.front().spec.name;
  SweepTally tally;
  tally.runs = runs.size();
  std::vector<std::optional<RunStatus>> statuses;
  size_t to_run = 0;
  for (const auto& run : runs) {
    statuses.push_back(status_unless_forced(run, force));
    to_run += skips_run(statuses.back(), force) ? 0 : 1;
  }
  say("ddplab: sweep {}: {} runs, {} already done", name, tally.runs, tally.runs - to_run);
  double spent_s = 0, trained = 0, left = 0;
  std::vector<double> epochs(runs.size(), 0.0);
  for (size_t i = 0; i < runs.size(); ++i)
    if (!skips_run(statuses[i], force)) left += epochs[i] = epochs_to_train(runs[i], force);
  const auto order = run_order(runs);
  for (size_t k = 0; k < runs.size() && !tally.stopped(); ++k) {
    const size_t i = order[k];
    const auto& run = runs[i];
    if (skips_run(statuses[i], force)) {
      say("[{}/{}] skipping {}: {}", k + 1, tally.runs, run.run_id, rundir::name(*statuses[i]));
      tally.count_skipped();
      continue;
    }
    say("[{}/{}] {} (ETA {})", k + 1, tally.runs, run.run_id, eta(spent_s, trained, left));
    const auto start = std::chrono::steady_clock::now();
    run_and_count(run, force, tally);
    spent_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    trained += epochs[i];
    left -= epochs[i];
    if (tally.stopped())
      complain(
          "ddplab: sweep {} interrupted during {}; run it again to finish the remaining runs (done runs are "
          "skipped)",
          name, run.run_id);
  }
  say("{}", sweep_summary(name, tally));
  for (const auto& [id, why] : tally.failures) say("ddplab:   failed {}: {}", id, why);
  say("ddplab: sweep {} took {} ({:.1f} s), one run at a time (--jobs N packs them)", name, minutes_seconds(spent_s),
      spent_s);
  say("{}", disk_use_line(runs.front().spec));
  if (!tally.stopped()) write_experiment_report(runs.front().spec);
  return sweep_exit_code(tally);
}

}  // namespace

int run_sweep(const std::string& path, const std::vector<std::string>& overrides, bool force, bool dry_run_only,
              const PackOptions& pack) {
  const auto [doc, runs] = config::load_sweep(path, overrides);
  const bool sweep = config::has_sweep(doc);
  // A budget too small for a run is an error before anything is run or written, dry run too.
  if (sweep && pack.packed()) packing_budget(runs, force, pack);
  if (dry_run_only) return dry_run(doc, runs, path, force);
  if (!sweep) return run_one(runs.front().spec, force);
  refuse_changed_runs(runs, force);
  record_sweep_runs(runs);
  if (pack.packed()) return run_packed(runs, force, pack);
  return run_all(runs, force);
}

int run_with_id(const std::string& path, const std::vector<std::string>& overrides, bool force,
                const std::string& run_id) {
  const auto doc = config::load_document(path, overrides);
  if (config::has_sweep(doc))
    throw Error(
        fmt::format("--run-id: names the run directory of one run, but {} has sweep keys (sweep, sweep_zip "
                    "or repeats); give a spec without them",
                    path));
  config::check_run_id_flag(run_id);
  auto spec = config::resolve(doc, path);
  spec.run_id = run_id;
  return run_one(spec, force);
}

}  // namespace ddplab::runner
