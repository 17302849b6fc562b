#include "base/stop_signal.h"

#include <signal.h>

#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace rm {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}

void handle(std::initializer_list<int> signals) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : signals) {
    // SA_RESTART: file I/O and MPI's own system calls carry on as if nothing happened.
    // SA_RESETHAND (a second one kills) for SIGTERM and SIGINT only: SIGUSR1 is a scheduler's
    // notice, never a person's "kill it now", and it often comes twice (scancel --full reaches
    // the ranks directly and through the batch script that passes it on).
    sa.sa_flags = SA_RESTART | (sig == SIGUSR1 ? 0 : SA_RESETHAND);
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
  handle({SIGTERM, SIGUSR1, SIGINT});
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
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace rm
