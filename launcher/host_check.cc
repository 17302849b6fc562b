#include "launcher/host_check.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "launcher/shell_capture.h"
#include "launcher/slurm_script.h"

namespace rm {

std::vector<std::string> unreachable_hosts(const std::vector<HostSlots>& hosts, double timeout_s) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.0f", timeout_s < 1 ? 1.0 : timeout_s);
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  // One background probe per host; each prints "<index> <exit code>". timeout -k: mpirun
  // ignores nothing, but a launch stuck in a dead connection gets a SIGKILL after 2 s more.
  std::string script;
  for (size_t i = 0; i < hosts.size(); ++i) {
    script += "( timeout -k 2 " + std::string(seconds) + " mpirun" + root + " --host " +
              shell_quote(hosts[i].host) + " -np 1 true >/dev/null 2>&1; echo " +
              std::to_string(i) + " $? ) & ";
  }
  script += "wait";
  const CapturedCommand probe = capture_command(script);
  std::vector<bool> ok(hosts.size(), false);
  std::istringstream lines(probe.output);
  size_t index = 0;
  int code = 0;
  while (lines >> index >> code) {
    if (index < ok.size()) ok[index] = code == 0;
  }
  std::vector<std::string> down;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!ok[i]) down.push_back(hosts[i].host);
  }
  return down;
}

}  // namespace rm
