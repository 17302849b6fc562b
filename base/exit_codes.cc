#include "base/exit_codes.h"

#include <csignal>
#include <cstring>

namespace rm {

std::string signal_in_exit_code(int code) {
  if (code <= 128 || code - 128 >= NSIG) return "";
  const char* abbrev = sigabbrev_np(code - 128);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(code - 128);
}

int documented_exit_code(int code) {
  if (code == kExitOk || code == kExitFailure || code == kExitBadInput || code == kExitStopped) {
    return code;
  }
  return signal_in_exit_code(code).empty() ? kExitFailure : code;
}

}  // namespace rm
