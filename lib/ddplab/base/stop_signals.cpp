#include "ddplab/base/stop_signals.h"

#include <atomic>
#include <cstring>

#include <fmt/format.h>

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

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT (Ctrl-C)";
  if (signal == SIGTERM) return "SIGTERM";
  const char* text = strsignal(signal);
  return text != nullptr ? std::string(text) : fmt::format("signal {}", signal);
}

}  // namespace ddplab
