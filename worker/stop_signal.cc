#include "worker/stop_signal.h"

#include <signal.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace rm {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: file I/O and MPI's own system calls carry on as if nothing happened.
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      throw std::runtime_error("sigaction(" + std::string(strsignal(sig)) + ") failed");
    }
  }
}

int stop_signal_received() { return g_stop_signal; }

}  // namespace rm
