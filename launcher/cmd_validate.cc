// `ringmaster validate JOB` and `ringmaster docs job-reference`.
#include <cstdio>
#include <optional>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "planning/host_memory.h"
#include "worker/initial_weights.h"
#include "worker/training_data.h"

namespace rm {

int cmd_validate(const JobArgs& args) {
  return report_errors([&] {
    JobArgs job_args = args;
    resolve_launch(job_args.hosts, job_args.nproc_given, job_args.nproc);
    const JobConfig job = load_job_args(job_args);
    const std::string weights = check_initial_weights(job, VerifyLevel::kChecksums);
    // The data files are not opened (they may be on a cluster's file system only), but the
    // tokenizer is read, as the initial weights are: a job's own files, named by keys.
    const std::optional<BpeTokenizer> tokenizer = load_job_tokenizer(job);
    // The backend the ranks would take, without insisting on it: a cuda job validates on a
    // machine without a GPU (it may be meant for a cluster); its GPU memory is then unchecked.
    const Backend b = job.parallel.backend;
    const ComputeKind backend = b == Backend::kCuda || (b == Backend::kAuto && gpu_memory() > 0)
                                    ? ComputeKind::kCuda
                                    : ComputeKind::kCpu;
    MemoryCapacity capacity;
    const MemoryFit fit = check_job_memory(job, job_args, backend, capacity);
    std::printf("%s: ok (job '%s', model %s, %d data-parallel rank%s, run_dir %s)\n%s\n",
                args.job.c_str(), job.name.c_str(), choice_name(job.model.type), job_args.nproc,
                job_args.nproc == 1 ? "" : "s", job.run_dir.c_str(),
                fit.summary(capacity).c_str());
    if (tokenizer) {
      std::printf("tokenizer %s: %d tokens\n", job.data.tokenizer.c_str(), tokenizer->vocab_size());
    }
    if (!weights.empty()) {
      std::printf("weights from %s: %s\n", job.model.init_from.c_str(), weights.c_str());
    }
    return kExitOk;
  });
}

int cmd_docs_job_reference() {
  std::fputs(job_reference_markdown().c_str(), stdout);
  return kExitOk;
}

}  // namespace rm
