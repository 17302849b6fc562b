// `ringmaster submit JOB [--set k=v ...] [--dry-run] [--fresh]`: a job file becomes a Slurm job
// that comes back by itself after a preemption, a time limit or a failure
// (launcher/slurm_script.h says how).
//
// The job is checked as `run` checks it (same errors, exit 2, nothing written), on
// cluster.nodes x cluster.tasks_per_node ranks, its memory against a node's
// (launcher/node_memory.h) as `run` checks this host's, its shape against the partition's nodes
// (launcher/slurm_nodes.h), then the resolved job is written to
// RUN_DIR/config.yaml and the script to RUN_DIR/slurm/job.sbatch: the job that runs is the job
// that was submitted, even if the YAML file is edited afterwards. Submitting the same job again
// continues the same run (its checkpoints); another job in the same run_dir is refused. A submit
// that fails after that (sbatch refuses the job) removes the run directory if it made it.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/input_error.h"
#include "base/run_dir.h"
#include "base/run_lock.h"
#include "configs/job_loader.h"
#include "io/atomic_file.h"
#include "launcher/child_process.h"
#include "launcher/commands.h"
#include "launcher/node_memory.h"
#include "launcher/shell_capture.h"
#include "launcher/slurm_job.h"
#include "launcher/slurm_nodes.h"
#include "launcher/slurm_script.h"
#include "observe/run_events.h"
#include "planning/memory_fit.h"
#include "worker/data/encoded_text.h"
#include "worker/initial_weights.h"
#include "worker/job_preparation.h"
#include "worker/training_data.h"

namespace rm {

namespace fs = std::filesystem;

namespace {

// The outermost of `path` and its parents that does not exist ("" when `path` exists): what
// creating `path` makes.
fs::path first_missing_ancestor(const fs::path& path) {
  std::error_code ec;
  fs::path missing;
  for (fs::path p = path; !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path()) {
    missing = p;
    if (p == p.parent_path()) break;
  }
  return missing;
}

// A run directory this submit made, removed again where the submit fails: the directory whole,
// then each parent it made that is left empty (never more: a sibling run another submit made
// beside it in the meantime keeps its parent). Claimed only while the directory holds nothing
// but the lock files, once this submit holds its lock: a submit that waited for another one's
// lock finds that one's files there, and leaves them.
class MadeRunDir {
 public:
  MadeRunDir(fs::path run_dir, fs::path top) : run_dir_(std::move(run_dir)), top_(std::move(top)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir_, ec)) {
      const std::string name = e.path().filename().string();
      if (name != ".lock" && name != ".ranks.lock") top_.clear();
    }
  }
  ~MadeRunDir() {
    if (!top_.empty()) remove();
  }
  MadeRunDir(const MadeRunDir&) = delete;
  MadeRunDir& operator=(const MadeRunDir&) = delete;
  void keep() { top_.clear(); }
  // Removes it (once); returns what became of it, for the message ("" when nothing was made).
  std::string remove() {
    if (top_.empty()) return "";
    std::error_code ec;
    fs::remove_all(run_dir_, ec);
    std::string said = run_dir_.string() + ", made for it, is removed";
    if (ec) said = run_dir_.string() + ", made for it, could not be removed: " + ec.message();
    for (fs::path p = run_dir_; !ec && p != top_ && p.has_parent_path();) {
      p = p.parent_path();
      if (!fs::remove(p, ec) || ec) break;  // not empty: someone else's too
    }
    top_.clear();
    return said;
  }

 private:
  fs::path run_dir_, top_;
};

}  // namespace

int cmd_submit(const SubmitArgs& args) {
  return report_errors([&] {
    if (args.job.nproc_given) {
      throw InputError(
          "--nproc: a submitted job runs cluster.nodes x cluster.tasks_per_node "
          "ranks; set those (--set cluster.nodes=N)");
    }
    const JobConfig job = load_job(args.job.job, args.job.sets, kRanksFromCluster);
    open_training_data(job);
    if (may_start_from_initial_weights(job, args.fresh, /*from_given=*/false)) {
      check_initial_weights(job, VerifyLevel::kChecksums);
    }
    // Checked like `run` checks this host, against a node: what was submitted must not die of
    // std::bad_alloc after a day in the queue.
    const ClusterConfig& cluster = job.cluster;
    const bool cuda = job.parallel.backend == Backend::kCuda ||
                      (job.parallel.backend == Backend::kAuto && cluster.gpus_per_node > 0);
    const SlurmPartitions partitions = query_slurm_partitions();  // one sinfo for both checks
    const MemoryCapacity node = slurm_node_capacity(cluster, partitions);
    const MemoryFit fit = check_memory_fit(
        job, cluster.nodes * cluster.tasks_per_node, cluster.tasks_per_node,
        cuda ? ComputeKind::kCuda : ComputeKind::kCpu, node, tokenized_text_bytes(job.data));
    // Nor wait in the queue for ever for nodes the partition does not have (slurm_nodes.h).
    if (!sbatch_extra_reshapes(cluster.sbatch_extra) && sbatch_environment_override().empty()) {
      const std::string refusal = slurm_shape_refusal(cluster, partitions);
      if (!refusal.empty()) throw InputError(args.job.job + ": " + refusal);
    }
    const fs::path run_dir = fs::absolute(job.run_dir).lexically_normal();
    SlurmScriptPaths paths;
    // As run (through a link, not resolved): the requeues of a long job run the install that
    // the link leads to then, not a version removed since.
    paths.binary = invoked_path();
    paths.config = (run_dir / "config.yaml").string();
    paths.run_dir = run_dir.string();
    paths.workdir = fs::current_path().string();
    std::string script;
    try {
      script = render_slurm_script(job, paths);
    } catch (const std::invalid_argument& e) {
      throw IoError(args.job.job + ": " + e.what());
    }
    if (args.dry_run) {
      std::fputs(script.c_str(), stdout);
      return kExitOk;
    }
    // The run lock first (prepare_run_directory takes it again at once), so that two submits of
    // one run see each other's jobs; then no job of this run may still be queued or running: it
    // would train the job as rewritten here, or beside this one's once the lock is free.
    // A submit that fails (sbatch refuses the job, a write fails) leaves no run directory it
    // made: it would hold a job that never ran, which a later submit of an edited job takes for
    // another job's run (--fresh), and `status` for a run.
    const fs::path missing = first_missing_ancestor(run_dir);
    own_run_dir(paths.run_dir);
    // The lock's variable names this process, which exits once sbatch has answered: not for the
    // job's ranks, which take the lock themselves (base/run_lock.h).
    ::unsetenv(kRunLockEnv);
    MadeRunDir made(run_dir, missing);
    if (const std::string id = submitted_job_id(paths.run_dir); !id.empty()) {
      std::string why;
      const std::string line = scontrol_job_line(id, &why);
      // Not known to scontrol any more ("Invalid job id": ended long enough ago) is fine; no
      // answer is no knowledge.
      if (line.empty() && why.find("Invalid job id") == std::string::npos) {
        throw IoError(job.run_dir + ": cannot tell whether its Slurm job " + id +
                      " may still run (scontrol: " + why + "); try again, or remove " +
                      job.run_dir + "/slurm/job_id if that job is gone");
      }
      const std::string state = scontrol_field(line, "JobState");
      if (slurm_job_may_run(state)) {
        throw IoError(job.run_dir + ": its Slurm job " + id + " is " + state + ": `scancel " + id +
                      "` first (submitting again then resumes from the "
                      "newest checkpoint), or wait for it to end");
      }
    }
    std::string changes;
    prepare_run_directory(job, args.fresh, &changes, FinishedRunJudge::kChecksums);
    if (!changes.empty()) std::printf("ringmaster: %s\n", changes.c_str());
    for (const char* sub : {"logs", "slurm"}) {
      std::error_code ec;
      fs::create_directories(run_dir / sub, ec);
      if (ec) throw IoError((run_dir / sub).string() + ": cannot create: " + ec.message());
    }
    const std::string script_path = (run_dir / "slurm" / "job.sbatch").string();
    write_file_atomic(script_path, script.data(), script.size());
    ::chmod(script_path.c_str(), 0755);

    // sbatch lets these variables beat the script's #SBATCH lines (man sbatch): a profile's
    // SBATCH_NO_REQUEUE made the job unrequeueable, SBATCH_SIGNAL took the grace signal away,
    // SBATCH_WAIT kept submit, and the run's lock, until the job's ranks gave up waiting for it.
    // SBATCH_EXPORT=NONE would reach the ranks' step too (srun inherits it) and leave them
    // without cluster.env; SBATCH_TIMELIMIT would replace cluster.time, unchecked against
    // cluster.signal_grace_s (a grace past the limit requeues without training, for ever).
    // The script sets what they would; they are not passed on.
    std::string dropped;
    std::vector<const char*> names = {"SBATCH_NO_REQUEUE", "SBATCH_REQUEUE",   "SBATCH_SIGNAL",
                                      "SBATCH_OPEN_MODE",  "SBATCH_OUTPUT",    "SBATCH_ERROR",
                                      "SBATCH_WAIT",       "SBATCH_ARRAY_INX", "SBATCH_EXPORT"};
    if (!job.cluster.time.empty()) names.push_back("SBATCH_TIMELIMIT");  // else: the user's time
    for (const char* name : names) {
      if (std::getenv(name) == nullptr) continue;
      dropped += (dropped.empty() ? "" : ", ") + std::string(name);
      ::unsetenv(name);
    }
    if (!dropped.empty()) {
      std::printf(
          "ringmaster: not passed to sbatch from the environment: %s (the batch script "
          "sets requeue, its signal, its log and how it is queued itself)\n",
          dropped.c_str());
    }
    const CapturedCommand sbatch = capture_command("sbatch --parsable " + shell_quote(script_path));
    if (sbatch.exit_code != 0) {
      const std::string removed = made.remove();
      print_error("sbatch failed (exit code " + std::to_string(sbatch.exit_code) +
                  "): " + sbatch.output + (removed.empty() ? "" : "\n(" + removed + ")"));
      return kExitFailure;
    }
    made.keep();
    // --parsable prints "JOBID" or "JOBID;CLUSTER" (possibly after warnings, one per line).
    std::string id = sbatch.output.substr(sbatch.output.rfind('\n') + 1);
    id = id.substr(0, id.find(';'));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      // Not recorded: a job_id that is no id would turn off the next submit's check that this
      // run's job is not still queued.
      print_error("sbatch exited 0 but answered '" + sbatch.output.substr(0, 200) +
                  "', not a job id; the job may be queued all the same: look with squeue "
                  "before submitting again");
      return kExitFailure;
    }
    const std::string id_file = (run_dir / "slurm" / "job_id").string();
    write_file_atomic(id_file, (id + "\n").data(), id.size() + 1);
    append_run_event(paths.run_dir, "submitted", {{"slurm_job_id", id}});
    std::printf(
        "ringmaster: submitted job '%s' as Slurm job %s (%d node%s x %d rank%s)\n"
        "  script: %s\n  log:    %s/logs/slurm-%s.out\n  follow: ringmaster status %s\n  %s%s\n",
        job.name.c_str(), id.c_str(), job.cluster.nodes, job.cluster.nodes == 1 ? "" : "s",
        job.cluster.tasks_per_node, job.cluster.tasks_per_node == 1 ? "" : "s", script_path.c_str(),
        paths.run_dir.c_str(), id.c_str(), shell_quote(job.run_dir).c_str(),
        fit.summary(node).c_str(),
        node.host > 0 ? "" : " (a node's memory is not known here: not checked)");
    return kExitOk;
  });
}

}  // namespace rm
