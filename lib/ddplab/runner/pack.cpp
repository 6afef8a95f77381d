#include "ddplab/runner/pack.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/base/stop_signals.h"
#include "ddplab/config/settings.h"
#include "ddplab/launch/process.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/rundir/run_reader.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/sweep.h"
#include "ddplab/runner/sweep_steps.h"

extern char** environ;

namespace fs = std::filesystem;

namespace ddplab::runner {
namespace {

using Clock = std::chrono::steady_clock;
using rundir::RunStatus;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// `ddplab run ...` as a child in its own process group (Ctrl-C reaches only the sweep, which
// passes it on), console output appended to `log`, CUDA_VISIBLE_DEVICES set to `gpus` if any.
// A killed sweep still stops its runs cleanly (SIGTERM on the parent's death).
pid_t spawn_run(const std::vector<std::string>& args, const fs::path& log, const std::vector<std::string>& gpus) {
  launch::SpawnOptions s;
  s.argv = args;  // args[0] is this binary (self_executable)
  s.program = launch::kSelfExecutableFile;
  if (!gpus.empty()) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
    env.push_back(fmt::format("CUDA_VISIBLE_DEVICES={}", fmt::join(gpus, ",")));
    s.env = std::move(env);
  }
  s.out = s.err = launch::Output::kAppend;
  s.out_file = s.err_file = log;
  s.stdin_null = true;
  s.own_process_group = true;
  s.parent_death_signal = SIGTERM;
  return launch::spawn(s).pid;
}

ino_t inode_of(const fs::path& file) {
  struct stat st{};
  return ::stat(file.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The last non-empty line of `file`, without a leading "ddplab: " ("" if none).
std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const std::string prefix = "ddplab: ";
  return last.rfind(prefix, 0) == 0 ? last.substr(prefix.size()) : last;
}

std::string percent(double acc) { return std::isfinite(acc) ? fmt::format("{:.2f}%", 100 * acc) : "-"; }

// One running run: its process, what it holds, what it has logged.
struct Child {
  size_t index = 0;  // in the sweep
  pid_t pid = -1;
  Allocation held;
  Clock::time_point started;
  fs::path dir, log;
  ino_t stale = 0;       // starting over: the inode of the epochs.jsonl it replaces (not its own)
  off_t seen_size = -1;  // of epochs.jsonl when last read
  int epoch = 0, first_epoch = -1;
  double test_acc = NAN;
};

// Reads the run's last epoch record when epochs.jsonl changed; true when its epoch advanced.
bool read_progress(Child& c) {
  const fs::path file = rundir::epochs_file(c.dir);
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0 || st.st_ino == c.stale || st.st_size == c.seen_size) return false;
  c.seen_size = st.st_size;
  std::vector<std::string> notes;  // a record that does not read is the report's to name
  const auto records = rundir::read_epoch_records(c.dir, notes);
  if (records.empty()) return false;
  const int epoch = records.back().epoch;
  c.test_acc = records.back().test_acc;
  if (c.first_epoch < 0) c.first_epoch = epoch;
  const bool advanced = epoch != c.epoch;
  c.epoch = epoch;
  return advanced;
}

// Event lines, and on a terminal a live table under them.
class Display {
 public:
  explicit Display(bool tty) : tty_(tty) {}
  bool tty() const { return tty_; }
  void event(const std::string& line) {
    erase();
    say("{}", line);
    draw();
  }
  void table(std::vector<std::string> rows) {
    if (!tty_ || seconds_since(drawn_at_) < 0.5) return;
    erase();
    rows_ = std::move(rows);
    draw();
  }
  void clear() {
    erase();
    rows_.clear();
  }

 private:
  void erase() {
    if (!tty_ || drawn_ == 0) return;
    fmt::print(stdout, "\x1b[{}F\x1b[J", drawn_);  // to the table's first line, clear to the end
    drawn_ = 0;
  }
  void draw() {
    if (!tty_) return;
    for (const auto& r : rows_) fmt::print(stdout, "{}\n", r);
    std::fflush(stdout);
    drawn_ = static_cast<int>(rows_.size());
    drawn_at_ = Clock::now();
  }
  bool tty_;
  int drawn_ = 0;
  std::vector<std::string> rows_;
  Clock::time_point drawn_at_ = Clock::now() - std::chrono::seconds(1);
};

std::string describe_budget(const Budget& b) {
  std::string jobs = b.jobs > 0 ? fmt::format("at most {} at once, ", b.jobs) : "";
  std::string gpus = b.gpus.empty() ? "no GPUs" : fmt::format("GPUs {}", fmt::join(b.gpus, ","));
  return fmt::format("{}{} core{}, {}", jobs, b.cores, b.cores == 1 ? "" : "s", gpus);
}

std::string describe_held(const Allocation& a) {
  if (!a.gpus.empty()) return fmt::format("GPU{} {}", a.gpus.size() == 1 ? "" : "s", fmt::join(a.gpus, ","));
  return fmt::format("{} core{}", a.cores, a.cores == 1 ? "" : "s");
}

class PackedSweep {
 public:
  PackedSweep(const std::vector<config::SweepRun>& runs, bool force, Budget budget)
      : runs_(runs),
        force_(force),
        pool_(std::move(budget)),
        display_(::isatty(STDOUT_FILENO) == 1),
        experiment_dir_(rundir::experiment_dir(runs.front().spec)),
        self_(launch::self_executable()) {}

  int run();

 private:
  void plan();
  void start(size_t i, const Allocation& a);
  void reap();
  void finish(Child& c, int status, const struct rusage& ru);
  void poll();
  void epoch_event(const Child& c);  // "[i/n] <run>: epoch e/E, test acc a" (not on a terminal)
  void pass_on_signals();
  std::string eta() const;
  std::vector<std::string> table_rows() const;
  void summary();
  std::string tag(size_t i) const { return fmt::format("[{}/{}]", i + 1, runs_.size()); }
  bool stopping() const { return passed_on_ > 0 || tally_.stopped(); }

  const std::vector<config::SweepRun>& runs_;
  bool force_;
  Pool pool_;
  Display display_;
  fs::path experiment_dir_;
  std::string self_;
  std::vector<Needs> needs_;
  std::vector<size_t> order_;
  std::vector<bool> pending_;
  std::vector<double> estimate_, fraction_;  // per run; fraction: 0..1 of it done (the ETA)
  std::vector<Child> children_;              // running
  SweepTally tally_;
  Clock::time_point start_ = Clock::now();
  double held_core_s_ = 0, held_gpu_s_ = 0, cpu_s_ = 0;
  int passed_on_ = 0;  // signals passed on to the runs
  int most_at_once_ = 0;
};

void PackedSweep::plan() {
  const size_t n = runs_.size();
  tally_.runs = n;
  pending_.assign(n, false);
  fraction_.assign(n, 0.0);
  std::vector<std::string> skipped;
  for (size_t i = 0; i < n; ++i) {
    needs_.push_back(needs_of(runs_[i].spec));
    estimate_.push_back(work_estimate(runs_[i].spec));
    const auto status = status_unless_forced(runs_[i], force_);
    pending_[i] = !skips_run(status, force_);
    if (pending_[i]) continue;
    skipped.push_back(fmt::format("{} skipping {}: {}", tag(i), runs_[i].run_id, rundir::name(*status)));
    tally_.count_skipped();
    estimate_.back() = 0;  // counts for nothing in the ETA
  }
  order_ = longest_first(estimate_, needs_, run_order(runs_));
  display_.event(fmt::format("ddplab: sweep {}: {} runs, {} already done; packed into {}, longest first",
                             runs_.front().spec.name, n, skipped.size(), describe_budget(pool_.budget())));
  for (const auto& line : skipped) display_.event(line);
}

void PackedSweep::start(size_t i, const Allocation& a) {
  const auto& run = runs_[i];
  Child c;
  c.index = i;
  c.held = a;
  c.dir = rundir::run_dir(run.spec);
  c.log = rundir::sweep_log_file(experiment_dir_, run.run_id);
  const bool resumable = !force_ && rundir::holds_resumable_run(c.dir);
  const bool start_over = run_start(resumable, force_) == RunStart::kStartOver;
  if (start_over) c.stale = inode_of(rundir::epochs_file(c.dir));
  const fs::path spec_file = rundir::sweep_spec_file(experiment_dir_, run.run_id);
  std::error_code ec;
  fs::create_directories(spec_file.parent_path(), ec);
  rundir::write_file_atomic(spec_file, fmt::format("{}\n", run.spec.resolved.dump(2)));
  rundir::append_line(c.log, fmt::format("--- {} ddplab: {} {} ---", rundir::utc_now(),
                                         start_over ? "starting" : "resuming", run.run_id));
  std::vector<std::string> args = {self_, "run", spec_file.string(), "--run-id", run.run_id};
  if (start_over) args.emplace_back("--force");
  c.pid = spawn_run(args, c.log, a.gpus);
  c.started = Clock::now();
  pending_[i] = false;
  children_.push_back(c);
  most_at_once_ = std::max(most_at_once_, static_cast<int>(children_.size()));
  display_.event(fmt::format("{} started {} ({}{}; {} running, ETA {})", tag(i), run.run_id, describe_held(a),
                             start_over ? "" : ", resuming from its checkpoint", children_.size(), eta()));
}

void PackedSweep::reap() {
  for (size_t k = 0; k < children_.size();) {
    struct rusage ru{};
    const auto status = launch::try_wait(children_[k].pid, &ru);
    if (!status) {
      ++k;
      continue;
    }
    Child c = children_[k];
    children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(k));
    finish(c, *status, ru);
  }
}

void PackedSweep::finish(Child& c, int status, const struct rusage& ru) {
  const double secs = seconds_since(c.started);
  pool_.give_back(c.held);
  held_core_s_ += c.held.cores * secs;
  held_gpu_s_ += static_cast<double>(c.held.gpus.size()) * secs;
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  cpu_s_ += tv(ru.ru_utime) + tv(ru.ru_stime);
  if (read_progress(c)) epoch_event(c);  // its last epoch and its exit can fall between two polls
  fraction_[c.index] = 1.0;
  // Killed by a signal: the second signal, passed on, is a stop; any other a failure.
  const bool killed = !WIFEXITED(status);
  const int code = killed && passed_on_ == 0 ? kExitFailure : launch::exit_code_of(status);
  const std::string why = killed && passed_on_ == 0 ? launch::describe_status(status) : "";
  const auto& run = runs_[c.index];
  const auto [manifest_status, message] = manifest_after(c.dir);
  const Tally t = tally_of(code, manifest_status);
  const std::string reason =
      t == Tally::kFailed ? failure_reason(why.empty() ? message : why, last_line(c.log), code) : "";
  tally_.count(t, code, run.run_id, reason);
  const std::string took = minutes_seconds(secs);
  switch (t) {
    case Tally::kDone:
      display_.event(fmt::format("{} done {}: test acc {} in {} (ETA {})", tag(c.index), run.run_id,
                                 percent(c.test_acc), took, eta()));
      break;
    case Tally::kDiverged:
    case Tally::kCollapsed:
      display_.event(fmt::format("{} {} {}: {} (after {})", tag(c.index), rundir::name(*manifest_status), run.run_id,
                                 message, took));
      break;
    case Tally::kFailed:
      display_.event(
          fmt::format("{} failed {}: {}; its console output: {}", tag(c.index), run.run_id, reason, c.log.string()));
      break;
    case Tally::kInterrupted:
      display_.event(fmt::format("{} interrupted {} at epoch {} of {} (exit code {})", tag(c.index), run.run_id,
                                 c.epoch, run.spec.epochs, code));
      break;
  }
}

void PackedSweep::poll() {
  for (auto& c : children_) {
    if (!read_progress(c)) continue;
    fraction_[c.index] = static_cast<double>(c.epoch) / std::max(1, runs_[c.index].spec.epochs);
    epoch_event(c);
  }
  display_.table(table_rows());
}

void PackedSweep::epoch_event(const Child& c) {
  if (!display_.tty())
    display_.event(fmt::format("{} {}: epoch {}/{}, test acc {}", tag(c.index), runs_[c.index].run_id, c.epoch,
                               runs_[c.index].spec.epochs, percent(c.test_acc)));
}

void PackedSweep::pass_on_signals() {
  const int sig = StopSignals::last();
  if (passed_on_ == 0 && !children_.empty())
    complain(
        "ddplab: sweep {}: {}: stopping the {} running run{} (each checkpoints); run the same command again "
        "to resume",
        runs_.front().spec.name, signal_name(sig), children_.size(), children_.size() == 1 ? "" : "s");
  for (const auto& c : children_) ::kill(c.pid, sig);
  passed_on_ = StopSignals::count();
  if (tally_.stop_code == 0) tally_.stop_code = exit_code_for_signal(sig);
}

std::string PackedSweep::eta() const {
  double total = 0, done = 0;
  for (size_t i = 0; i < runs_.size(); ++i) {
    total += estimate_[i];
    done += estimate_[i] * fraction_[i];
  }
  if (done <= 0 || total <= 0) return "-:--";
  return minutes_seconds(seconds_since(start_) * (total - done) / done);
}

std::vector<std::string> PackedSweep::table_rows() const {
  size_t waiting = 0;
  for (bool p : pending_) waiting += p ? 1 : 0;
  std::vector<std::string> rows = {
      fmt::format("  sweep {}: {} done, {} failed, {} running, {} waiting; ETA {}", runs_.front().spec.name,
                  tally_.done + tally_.skipped, tally_.failures.size(), children_.size(), waiting, eta()),
      fmt::format("  {:<48} {:<8} {:>9} {:>8} {:>6}", "run", "state", "epoch", "acc", "ETA")};
  for (const auto& c : children_) {
    const auto& run = runs_[c.index];
    const int epochs_here = c.first_epoch < 0 ? 0 : c.epoch - c.first_epoch;
    const std::string run_eta =
        epochs_here > 0 ? minutes_seconds(seconds_since(c.started) / epochs_here * (run.spec.epochs - c.epoch))
                        : "-:--";
    const std::string id = run.run_id.size() > 48 ? run.run_id.substr(0, 45) + "..." : run.run_id;
    rows.push_back(fmt::format("  {:<48} {:<8} {:>9} {:>8} {:>6}", id, passed_on_ > 0 ? "stopping" : "running",
                               fmt::format("{}/{}", c.epoch, run.spec.epochs), percent(c.test_acc), run_eta));
  }
  return rows;
}

void PackedSweep::summary() {
  display_.clear();
  const std::string& name = runs_.front().spec.name;
  const double wall = seconds_since(start_);
  const Budget& b = pool_.budget();
  say("{}", sweep_summary(name, tally_));
  for (const auto& [id, why] : tally_.failures) say("ddplab:   failed {}: {}", id, why);
  std::string gpus;
  if (!b.gpus.empty())
    gpus =
        fmt::format("; GPUs {:.0f}% held ({:.0f} GPU-s of {} x {:.0f} s)",
                    busy_percent(held_gpu_s_, static_cast<int>(b.gpus.size()), wall), held_gpu_s_, b.gpus.size(), wall);
  say("ddplab: sweep {} took {} ({:.1f} s), at most {} run{} at once; cores {:.0f}% held ({:.0f} core-s of {} x "
      "{:.1f} s), CPU time {:.0f} s ({:.0f}% of them){}",
      name, minutes_seconds(wall), wall, most_at_once_, most_at_once_ == 1 ? "" : "s",
      busy_percent(held_core_s_, b.cores, wall), held_core_s_, b.cores, wall, cpu_s_,
      busy_percent(cpu_s_, b.cores, wall), gpus);
  say("{}", disk_use_line(runs_.front().spec));
  if (tally_.stopped())
    complain(
        "ddplab: sweep {} interrupted; run the same command again to resume the interrupted runs and start "
        "the others (done runs are skipped)",
        name);
  else
    write_experiment_report(runs_.front().spec);
}

int PackedSweep::run() {
  StopSignals signals(StopSignals::Second::kRecord);
  plan();
  for (;;) {
    if (StopSignals::count() > passed_on_) pass_on_signals();
    while (!stopping()) {
      auto next = start_next(order_, pending_, needs_, pool_);
      if (!next) break;
      start(next->first, next->second);
    }
    if (children_.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reap();
    poll();
  }
  summary();
  return sweep_exit_code(tally_);
}

}  // namespace

Budget packing_budget(const std::vector<config::SweepRun>& runs, bool force, const PackOptions& options) {
  bool cuda = false;
  for (const auto& r : runs) cuda = cuda || r.spec.replicas.device == config::Device::kCuda;
  // The CUDA device count only when a run or --gpus asks (it initializes CUDA in this process).
  const int devices = cuda || options.gpus >= 0 ? static_cast<int>(torch::cuda::device_count()) : 0;
  const auto visible = visible_gpus(std::getenv("CUDA_VISIBLE_DEVICES"), devices);
  const Budget budget = budget_of(options, static_cast<int>(std::thread::hardware_concurrency()), visible);
  for (const auto& r : runs)
    if (!skips_run(status_unless_forced(r, force), force)) check_fits(r.run_id, r.spec, budget);
  return budget;
}

int run_packed(const std::vector<config::SweepRun>& runs, bool force, const PackOptions& options) {
  return PackedSweep(runs, force, packing_budget(runs, force, options)).run();
}

}  // namespace ddplab::runner
