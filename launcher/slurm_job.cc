#include "launcher/slurm_job.h"

#include <algorithm>

#include "io/posix_io.h"
#include "launcher/shell_capture.h"
#include "launcher/slurm_script.h"

namespace rm {

std::string submitted_job_id(const std::string& run_dir) {
  std::string id;
  try {
    id = io::read_file(run_dir + "/slurm/job_id", 4096);  // a job id, not whatever the file holds
  } catch (const std::exception&) {
    return "";  // never submitted
  }
  id.erase(std::remove(id.begin(), id.end(), '\n'), id.end());
  return id;
}

std::string scontrol_job_line(const std::string& id, std::string* why) {
  const CapturedCommand sc = capture_command("timeout 5 scontrol show job -o " + shell_quote(id));
  if (sc.exit_code != 0 || sc.output.find("JobId=") == std::string::npos) {
    if (why != nullptr) *why = sc.output.empty() ? "no answer" : sc.output;
    return "";
  }
  return sc.output;
}

std::string scontrol_field(const std::string& line, const std::string& key) {
  const std::string needle = key + "=";
  size_t at = line.find(" " + needle);
  if (at == std::string::npos) {
    if (line.rfind(needle, 0) != 0) return "";
    at = 0;
  } else {
    ++at;
  }
  const size_t begin = at + needle.size();
  return line.substr(begin, line.find(' ', begin) - begin);
}

bool slurm_job_may_run(const std::string& state) {
  for (const char* alive : {"PENDING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                            "REQUEUE_FED", "CONFIGURING", "SUSPENDED", "RESIZING", "SIGNALING",
                            "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT", "STAGE_OUT"}) {
    if (state == alive) return true;
  }
  return false;
}

bool slurm_reason_blocks_for_good(const std::string& reason) {
  for (const char* never :
       {"PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig", "BadConstraints"}) {
    if (reason == never) return true;
  }
  // QOSMaxCpuPerJobLimit, AssocMaxNodePerJobLimit, QOSMaxGRESPerNode, QOSMinCpuNotSatisfied,
  // ...: what one job asks beyond (or below) what one job may have. (The per-user, per-account
  // and group limits clear as other jobs end.)
  if (reason.rfind("QOSMin", 0) == 0) return true;
  const bool limit = reason.rfind("QOS", 0) == 0 || reason.rfind("Assoc", 0) == 0;
  return limit && (reason.find("PerJob") != std::string::npos ||
                   reason.find("PerNode") != std::string::npos);
}

}  // namespace rm
