#include "launcher/cmd_common.h"

#include <filesystem>

#include "configs/config_error.h"
#include "configs/job_loader.h"
#include "launcher/hostfile.h"

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

}  // namespace rm
