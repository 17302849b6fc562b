#include "launcher/shell_capture.h"

#include <sys/wait.h>

#include <cstdio>

namespace rm {

CapturedCommand capture_command(const std::string& command) {
  CapturedCommand r;
  std::FILE* pipe = ::popen(("(" + command + ") </dev/null 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  while (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
  return r;
}

}  // namespace rm
