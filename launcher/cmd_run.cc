// `ringmaster run JOB`: validate everything that can be validated, then train and save.
//
// Order matters for "nothing half-written": the job file, the data and the run directory are
// all checked before the first byte is written into the run directory.
#include <cstdio>

#include "checkpoint/atomic_file.h"
#include "checkpoint/weights_file.h"
#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "launcher/exit_codes.h"
#include "launcher/run_dir.h"
#include "worker/trainer.h"

namespace rm {

int cmd_run(const RunArgs& args) {
  return report_errors([&] {
    if (args.job.nproc != 1) {
      print_error("--nproc " + std::to_string(args.job.nproc) +
                  ": multi-rank training is not built yet; run with --nproc 1");
      return kExitBadInput;
    }
    const JobConfig job = load_job_args(args.job);
    TrainingData data = open_training_data(job);
    prepare_run_dir(job.run_dir, args.fresh);
    const std::string resolved = to_yaml(job);
    write_file_atomic(run_file(job.run_dir, "config.yaml"), resolved.data(), resolved.size());

    const int threads = configure_threads(job.parallel, 1);
    MetricsLog metrics(run_file(job.run_dir, "metrics.jsonl"), /*append=*/false);
    Trainer trainer(job, data, {true, &metrics});
    const Model& model = trainer.model();
    std::printf("ringmaster: job '%s' | %s %.2fM parameters | %d steps x %d samples x %d tokens "
                "| 1 rank x %d threads | run_dir %s\n",
                job.name.c_str(), job.model.type.c_str(), model.layout().size() / 1e6,
                static_cast<int>(job.train.steps), job.train.global_batch, job.model.seq_len,
                threads, job.run_dir.c_str());
    std::fflush(stdout);
    trainer.run();
    const std::string weights = run_file(job.run_dir, "weights.bin");
    save_weights(weights, trainer.params().data(), trainer.params().size());
    std::printf("ringmaster: done; weights in %s\n", weights.c_str());
    return kExitOk;
  });
}

}  // namespace rm
