#include "launcher/cmd_common.h"

#include <algorithm>
#include <filesystem>

#include "configs/config_error.h"
#include "configs/job_loader.h"
#include "launcher/hostfile.h"
#include "planning/host_memory.h"

namespace rm {

JobConfig load_job_args(const JobArgs& args) {
  return load_job(args.job, args.sets, args.nproc);
}

MpiLaunch resolve_launch(const std::string& hosts, bool nproc_given, int& nproc) {
  MpiLaunch launch;
  if (!hosts.empty()) {
    const int slots = total_slots(read_hostfile(hosts));
    if (!nproc_given) {
      nproc = slots;
    } else if (nproc > slots) {
      throw JobConfigError({ConfigError{hosts, 0, 0, "",
                                        "--nproc " + std::to_string(nproc) + " but the hostfile has " +
                                            std::to_string(slots) + " slot" +
                                            (slots == 1 ? "" : "s")}});
    }
    launch.hostfile = std::filesystem::absolute(hosts).string();
  }
  launch.nproc = nproc;
  return launch;
}

int ranks_on_busiest_host(const std::string& hosts, int nproc) {
  if (hosts.empty()) return nproc;
  int left = nproc, busiest = 0;
  for (const HostSlots& h : read_hostfile(hosts)) {
    const int here = std::min(h.slots, left);
    busiest = std::max(busiest, here);
    left -= here;
  }
  return std::max(busiest, 1);
}

MemoryFit check_job_memory(const JobConfig& job, const JobArgs& args, ComputeKind backend,
                           MemoryCapacity& capacity) {
  capacity.host = host_memory();
  capacity.gpu = backend == ComputeKind::kCuda ? gpu_memory() : 0;
  return check_memory_fit(job, args.nproc, ranks_on_busiest_host(args.hosts, args.nproc),
                          backend, capacity);
}

}  // namespace rm
