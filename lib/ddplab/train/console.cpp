#include "ddplab/train/console.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace ddplab::train {
namespace {

std::string format_duration(double s) {
  const int t = static_cast<int>(s + 0.5);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

}  // namespace

Console::Console(const config::ExperimentSpec& spec, const distributed::World& world, bool progress, bool quiet)
    : spec_(spec),
      rank_(world.rank),
      size_(world.size),
      tty_(progress && world.rank == 0 && ::isatty(STDOUT_FILENO) == 1),
      plain_progress_(progress && ::isatty(STDOUT_FILENO) != 1 && spec.log.progress_s > 0),
      quiet_(quiet) {}

void Console::on_step(const StepProgress& p) {
  if (p.epoch != epoch_) {
    epoch_ = p.epoch;
    last_line_s_ = 0;
  }
  const double every_s = tty_ ? 0.5 : spec_.log.progress_s;
  const double el = p.epoch_elapsed_s;
  if (!(tty_ || plain_progress_) || !(el - last_line_s_ > every_s)) return;
  last_line_s_ = el;
  const double ips = static_cast<double>((p.step + 1) * spec_.global_batch) / el;
  // The epoch's pace, over the steps left in it and (evaluations aside) in the epochs after it.
  const double step_s = el / static_cast<double>(p.step + 1);
  const double epoch_left_s = step_s * static_cast<double>(p.steps - p.step - 1);
  const int epochs_after = spec_.epochs - p.epoch - 1;
  std::string where = fmt::format("epoch {}/{}  step {}/{}  {:.0f} img/s  ETA {}", p.epoch + 1, spec_.epochs,
                                  p.step + 1, p.steps, ips, format_duration(epoch_left_s));
  if (epochs_after > 0)
    where += fmt::format(" (run {})", format_duration(epoch_left_s + step_s * static_cast<double>(p.steps) *
                                                                         static_cast<double>(epochs_after)));
  if (tty_) {
    fmt::print("\r  {}   ", where);
  } else {
    fmt::print("{}{}  loss {:.4f}\n", size_ > 1 ? fmt::format("rank {}: ", rank_) : "", where, p.mean_loss());
  }
  std::fflush(stdout);
}

void Console::on_epoch(const rundir::EpochRecord& rec) {
  clear_live_line();
  if (!quiet_) {
    std::string line = fmt::format("epoch {}/{}  lr {:.4g}  train loss {:.4f} acc {:.2f}%", rec.epoch, spec_.epochs,
                                   rec.lr, rec.train_loss, 100 * rec.train_acc);
    if (rec.val_loss && rec.val_acc)
      line += fmt::format("  val loss {:.4f} acc {:.2f}%", *rec.val_loss, 100 * *rec.val_acc);
    line += fmt::format("  test loss {:.4f} acc {:.2f}%  {:.1f} s  {:.0f} img/s", rec.test_loss, 100 * rec.test_acc,
                        rec.epoch_s, rec.images_per_s);
    if (size_ > 1) line += fmt::format("  comm wait {:.2f} s", rec.comm_wait_s);
    if (rec.grad_noise_scale) line += fmt::format("  B_simple {:.0f}", *rec.grad_noise_scale);
    fmt::print("{}\n", line);
  }
  for (const auto& warning : rec.audit_warnings)
    fmt::print("ddplab: audit warning (debug.audits is warn, training goes on): {}\n", warning);
  std::fflush(stdout);
}

void Console::clear_live_line() const {
  if (tty_) fmt::print("\r{:80}\r", "");
}

void Console::on_note(const std::string& note) {
  clear_live_line();
  fmt::print("ddplab: note: {}\n", note);
  std::fflush(stdout);
}

}  // namespace ddplab::train
