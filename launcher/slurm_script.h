// The Slurm batch script that `ringmaster submit` writes to RUN_DIR/slurm/job.sbatch.
//
// What the script does, run by Slurm (and again after every requeue):
//  - #SBATCH lines from the job: name, nodes, tasks per node, GPUs per node, CPUs per task,
//    partition, account, qos, time, --requeue, --open-mode=append, output to
//    RUN_DIR/logs/slurm-%j.out, --signal=B:USR1@<cluster.signal_grace_s>, sbatch_extra.
//  - exports cluster.env, then starts the ranks: `srun --mpi=pmix --kill-on-bad-exit=1
//    <ringmaster, absolute path> worker <RUN_DIR/config.yaml>` in the background, and waits for
//    them with `wait`, which a trapped signal interrupts, so that USR1 or TERM to the batch shell
//    (a preemption notice, the time limit's --signal, scancel --batch/--full) is passed on to the
//    step at once as "checkpoint and stop" (USR1; as it came when checkpoint.on_signal is off).
//  - a SIGTERM to the batch script means `scancel` (or Slurm ending the job): whatever the ranks
//    did, the script does not requeue, so that a job can always be cancelled.
//  - otherwise the ranks' exit code decides: 0 the training finished (the job ends COMPLETED); 2 bad
//    input (FAILED, never retried); 75 stopped after a checkpoint (requeued: `scontrol requeue`,
//    since a job that ends by itself during a preemption's grace time would end COMPLETED and
//    never come back); anything else a failure (rank killed, collective timeout, watchdog, node
//    lost), requeued up to resilience.max_restarts times counted across the requeues of this job
//    id (RUN_DIR/slurm/failures-<job id>), then FAILED with the reason in the log.
//  - the rerun (SLURM_RESTART_COUNT set) runs the same command, which resumes from the newest
//    verified checkpoint (or starts again from step 0 when the run died before its first).
//  - each decision is one line in the Slurm log and one JSON line in RUN_DIR/events.jsonl.
//
// Quoting: every value that comes from the job is either checked to be a plain Slurm word
// (configs/cluster_checks.h, schema.cc) or single-quoted for the shell (shell_quote), so nothing
// in a job file can run shell. The #SBATCH lines are read by sbatch, not by bash; a value there
// holds no newline (refused), so it cannot become a line of its own.
#pragma once

#include <string>

#include "configs/job_config.h"

namespace rm {

struct SlurmScriptPaths {
  std::string binary;   // absolute path of the ringmaster binary the ranks run
  std::string config;   // absolute path of RUN_DIR/config.yaml
  std::string run_dir;  // absolute path of RUN_DIR
  std::string workdir;  // absolute path the job runs in (where relative paths in the job point)
};

// The whole script. Throws std::invalid_argument if a path cannot be written into it (a newline,
// a double quote or a control character in a path that goes into an #SBATCH line).
std::string render_slurm_script(const JobConfig& job, const SlurmScriptPaths& paths);

// `s` as one bash word that expands to exactly s: '...' with each ' written as '\''.
std::string shell_quote(const std::string& s);

}  // namespace rm
