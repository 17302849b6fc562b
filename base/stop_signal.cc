#include "base/stop_signal.h"

#include <signal.h>

#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "base/elapsed.h"

namespace rm {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
// When SIGTERM, SIGINT and SIGHUP were first received (CLOCK_MONOTONIC ns; 0: not yet), by
// signal number. Written only by their own handlers, which do not interrupt themselves (the
// signal is blocked while it runs).
volatile int64_t g_first_ns[NSIG] = {};

void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
  if (sig != SIGTERM && sig != SIGINT && sig != SIGHUP) return;
  volatile int64_t& first = g_first_ns[sig];
  const int64_t now = monotonic_ns();
  if (first == 0) {
    first = now;
    return;
  }
  if (now - first < kStopRepeatWindowNs) return;  // the same stop, delivered again
  // Again, later: the default action, once this handler returns (the signal is blocked here).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void handle(std::initializer_list<int> signals) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : signals) {
    // A SIGHUP ignored by whoever started us (nohup: the run is to outlive the terminal) stays
    // ignored: taking it as a stop would end the run nohup was asked to keep.
    struct sigaction old {};
    if (sig == SIGHUP && sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) {
      continue;
    }
    // SA_RESTART: file I/O and MPI's own system calls carry on as if nothing happened. A second
    // SIGTERM, SIGINT or SIGHUP kills (the handler says when); SIGUSR1 never does.
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, nullptr) != 0) {
      throw std::runtime_error("sigaction(" + std::string(strsignal(sig)) + ") failed");
    }
  }
}

}  // namespace

void catch_stop_notice_early() {
  handle({SIGUSR1});
}

void install_stop_signal_handlers() {
  handle({SIGTERM, SIGUSR1, SIGINT, SIGHUP});
}

void release_stop_notice() {
  ::signal(SIGUSR1, SIG_DFL);
  if (g_stop_signal == SIGUSR1) ::raise(SIGUSR1);
}

int stop_signal_received() {
  return g_stop_signal;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace rm
