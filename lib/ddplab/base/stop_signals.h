// The one handler of SIGINT and SIGTERM in ddplab. While a StopSignals lives, either signal is
// recorded, not acted on: the trainer reads last() after each step and stops every rank after
// the same step (train/run_ends.h, Interrupted); the launcher and a packed sweep pass each signal on to their
// children (launch/launcher.h, runner/pack.h). The destructor puts the old handlers back.
//
// It sits in base/ because both train/ and launch/ use it and neither may include the other.
#pragma once
#include <signal.h>

#include <string>

namespace ddplab {

class StopSignals {
 public:
  // What a second signal of the same kind does.
  enum class Second {
    kRecord,         // recorded like the first (the launcher and the sweep escalate themselves)
    kDefaultAction,  // the default action, at once (a training process: Ctrl-C twice stops it now)
  };

  // Installs the handler and clears last() and count().
  explicit StopSignals(Second second);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  static int last();   // the last SIGINT/SIGTERM received; 0 while none was
  static int count();  // how many were received

 private:
  struct sigaction old_int_{}, old_term_{};
};

// "SIGINT (Ctrl-C)", "SIGTERM": a stop signal as a shell user names it, for messages such as
// "interrupted by SIGINT (Ctrl-C)" (strsignal's "Interrupt" made "interrupted by Interrupt");
// strsignal's text for any other signal.
std::string signal_name(int signal);

}  // namespace ddplab
