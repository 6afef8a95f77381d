#include "ddplab/base/stop_signals.h"

#include <atomic>

namespace ddplab {
namespace {

std::atomic<int> g_last{0};
std::atomic<int> g_count{0};

void on_signal(int sig) {
  g_last = sig;
  g_count.fetch_add(1);
}

}  // namespace

StopSignals::StopSignals(Second second) {
  g_last = 0;
  g_count = 0;
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sa.sa_flags = second == Second::kDefaultAction ? SA_RESETHAND : 0;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::last() { return g_last; }
int StopSignals::count() { return g_count; }

}  // namespace ddplab
