#include "launcher/restart_placement.h"

#include <algorithm>

#include "configs/job_loader.h"

namespace rm {

RestartPlacement place_without(const JobConfig& job, const std::vector<HostSlots>& hosts,
                               int nproc, const std::vector<std::string>& down) {
  RestartPlacement p;
  for (const HostSlots& h : hosts) {
    if (std::find(down.begin(), down.end(), h.host) == down.end()) p.hosts.push_back(h);
  }
  const int slots = total_slots(p.hosts);
  const std::string left = std::to_string(p.hosts.size()) + " host" +
                           (p.hosts.size() == 1 ? "" : "s") + " left, " + std::to_string(slots) +
                           " slot" + (slots == 1 ? "" : "s");
  if (p.hosts.empty()) {
    p.why = "no host is left";
    return p;
  }
  if (slots >= nproc) {
    p.nproc = nproc;
    p.why = "all " + std::to_string(nproc) + " ranks on the " + left;
    return p;
  }
  if (!job.resilience.shrink) {
    p.why = "the " + left + ", for " + std::to_string(nproc) +
            " ranks (resilience.shrink: false)";
    return p;
  }
  for (int m = slots; m >= 1; --m) {
    if (check_batch_arithmetic(job, m).empty()) {
      p.nproc = m;
      p.why = "shrunk from " + std::to_string(nproc) + " to " + std::to_string(m) + " ranks on the " +
              left + (m < slots ? " (the most that train.global_batch allows)" : "");
      return p;
    }
  }
  p.why = "train.global_batch (" + std::to_string(job.train.global_batch) +
          ") is not a multiple of micro_batch (" + std::to_string(job.train.micro_batch) +
          ") x ranks for any rank count the " + left + " hold";
  return p;
}

std::string hostfile_text(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) out += h.host + " slots=" + std::to_string(h.slots) + "\n";
  return out;
}

}  // namespace rm
