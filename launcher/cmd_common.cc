#include "launcher/cmd_common.h"

#include "configs/job_loader.h"

namespace rm {

JobConfig load_job_args(const JobArgs& args) {
  return load_job(args.job, args.sets, args.nproc);
}

}  // namespace rm
