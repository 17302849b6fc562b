#include "launcher/host_check.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "launcher/mpi_session_dir.h"
#include "launcher/shell_capture.h"
#include "launcher/slurm_script.h"

namespace rm {

std::vector<std::string> unreachable_hosts(const std::vector<HostSlots>& hosts, double timeout_s,
                                           std::vector<std::string>* reasons) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.0f", timeout_s < 1 ? 1.0 : timeout_s);
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  // One background probe per host; each prints one line, "<index> <exit code> <the first line
  // of mpirun's output that is not blank or one of the dashes boxing its messages>". timeout
  // -k: mpirun ignores nothing, but a launch stuck in a dead connection gets a SIGKILL after 2 s
  // more.
  // Each probe with a session base of its own: they run at once, and just before the job's own
  // launch on the same hosts (mpi_session_dir.h).
  std::string script;
  std::vector<std::string> bases;
  for (size_t i = 0; i < hosts.size(); ++i) {
    bases.push_back(new_mpi_session_base());
    const std::string base =
        bases.back().empty() ? "" : " --mca orte_tmpdir_base " + shell_quote(bases.back());
    script += "( out=$(timeout -k 2 " + std::string(seconds) + " mpirun" + root + base +
              " --host " + shell_quote(hosts[i].host) +
              " -np 1 true 2>&1 </dev/null); code=$?; echo \"" + std::to_string(i) +
              " $code $(printf '%s\\n' \"$out\" | grep -v -e '^[[:space:]]*$' -e '^--*$' | "
              "head -n 1 | cut -c1-200)\" ) & ";
  }
  script += "wait";
  const CapturedCommand probe = capture_command(script);
  for (const std::string& base : bases) remove_mpi_session_base(base);
  std::vector<int> codes(hosts.size(), -1);
  std::vector<std::string> said(hosts.size());
  std::istringstream lines(probe.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    size_t index = 0;
    int code = 0;
    if (!(fields >> index >> code) || index >= codes.size()) continue;
    codes[index] = code;
    std::getline(fields >> std::ws, said[index]);
  }
  std::vector<std::string> down;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (codes[i] == 0) continue;
    down.push_back(hosts[i].host);
    if (reasons == nullptr) continue;
    // 124: timeout's own code at the deadline; 137: its SIGKILL 2 s later.
    if (codes[i] == 124 || codes[i] == 137) {
      reasons->push_back(std::string("no answer within ") + seconds + " s");
    } else {
      reasons->push_back("mpirun exited " + std::to_string(codes[i]) +
                         (said[i].empty() ? "" : ": " + said[i]));
    }
  }
  return down;
}

}  // namespace rm
