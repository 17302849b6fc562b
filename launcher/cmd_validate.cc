// `ringmaster validate JOB` and `ringmaster docs job-reference`.
#include <cstdio>
#include <optional>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "planning/host_memory.h"
#include "worker/data/file_glob.h"
#include "worker/initial_weights.h"
#include "worker/training_data.h"

namespace rm {

int cmd_validate(const JobArgs& args) {
  return report_errors([&] {
    JobArgs job_args = args;
    resolve_launch(job_args.hosts, job_args.nproc_given, job_args.nproc);
    const JobConfig job = load_job_args(job_args);
    // A job for a cluster (more ranks there than here) is checked as `submit` checks it too, on
    // cluster.nodes x cluster.tasks_per_node ranks, where the batch arithmetic differs; --nproc
    // or --hosts say the job is meant for `run`.
    std::string submit_note;
    const long long cluster_ranks =
        static_cast<long long>(job.cluster.nodes) * job.cluster.tasks_per_node;
    if (!args.nproc_given && args.hosts.empty() && cluster_ranks != job_args.nproc) {
      const std::string as_submitted = "as submitted, on " + std::to_string(cluster_ranks) +
                                       " ranks (cluster.nodes x cluster.tasks_per_node)";
      try {
        load_job(args.job, args.sets, kRanksFromCluster);
      } catch (const JobConfigError& e) {
        std::vector<ConfigError> errors = e.errors;
        for (ConfigError& error : errors) error.message = as_submitted + ": " + error.message;
        throw JobConfigError(errors);
      }
      submit_note = as_submitted + ": ok";
    }
    const std::string weights = check_initial_weights(job, VerifyLevel::kChecksums);
    // The tokenizer is read, as the initial weights are: a job's own files, named by keys.
    const std::optional<BpeTokenizer> tokenizer = load_job_tokenizer(job);
    // The data files are opened as `run` opens them where they are here (a damaged shard, an
    // empty file: refused, as `run` would); a job for a cluster may name files only its file
    // system has, which is said, not refused. Text to encode with a tokenizer is only found
    // (encoding it all may take minutes: `run` does).
    std::string data_note;
    try {
      if (tokenizer && job.data.format == DataFormat::kText) {
        expand_globs(job.data.train);
        if (!job.data.val.empty()) expand_globs(job.data.val);
      } else {
        open_training_data(job);
      }
    } catch (const InputError& e) {
      bool here = false;
      for (const std::vector<std::string>* files : {&job.data.train, &job.data.val}) {
        try {
          if (!files->empty()) here = !expand_globs(*files).empty() || here;
        } catch (const std::exception&) {
        }
      }
      if (here) throw;
      data_note = std::string("data not checked: ") + e.what() +
                  " (here; a job for a cluster may name files on its file system only)";
    }
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
    if (!submit_note.empty()) std::printf("%s\n", submit_note.c_str());
    if (!data_note.empty()) std::printf("%s\n", data_note.c_str());
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
