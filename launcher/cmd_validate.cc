// `ringmaster validate JOB` and `ringmaster docs job-reference`.
#include <cstdio>

#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "worker/error_report.h"
#include "worker/exit_codes.h"

namespace rm {

int cmd_validate(const JobArgs& args) {
  return report_errors([&] {
    const JobConfig job = load_job_args(args);
    std::printf("%s: ok (job '%s', model %s, %d data-parallel rank%s, run_dir %s)\n",
                args.job.c_str(), job.name.c_str(), job.model.type.c_str(), args.nproc,
                args.nproc == 1 ? "" : "s", job.run_dir.c_str());
    return kExitOk;
  });
}

int cmd_docs_job_reference() {
  std::fputs(job_reference_markdown().c_str(), stdout);
  return kExitOk;
}

}  // namespace rm
