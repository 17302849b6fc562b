// One live run per run directory.
//
// Two runs writing the same checkpoints, metrics.jsonl and weights.bin corrupt each other
// silently, and on a cluster it is not rare: a requeued job can start while the old
// allocation's processes are still alive, or a user resubmits a job that is still running. So
// the process that owns a run -- `ringmaster run`'s supervisor (for all its restarts), or rank 0
// when srun or mpirun started the ranks directly -- holds flock(2) on RUN_DIR/.lock from before
// the first byte is written until it exits. The kernel drops the lock when the last process
// holding the open file goes, however it dies, so a stale lock cannot outlive a crash (no pid
// files to clean up). The descriptor is inherited by children (mpirun), so the lock stays held
// while any of them lives even if the supervisor itself is killed.
//
// The owner exports RM_RUN_LOCK="<pid> <host> <canonical run dir>"; a rank 0 that finds its run
// directory there does not lock again (its supervisor holds the lock for it) when, on the same
// host, that pid is among its ancestors, or, on another host (`run --hosts` placing rank 0 on
// the hostfile's first host), the lock file's lease is held by that host and pid. The checks
// matter: sbatch exports the submitting shell's environment to the job, and `ringmaster submit`
// takes the lock too (to refuse a resubmission, or --fresh, while the run is live; it does not
// pass the variable on to sbatch).
//
// flock works across hosts on NFS (Linux maps it to byte-range locks) and on Lustre mounted with
// -o flock; on a filesystem without lock support the lock fails with a message saying so. Where
// flock is local to each host (NFS with local_lock=flock, some FUSE file systems), the lease the
// holder renews in the lock file keeps a run on another host out (run_lease.h), and lets a run
// take over from a holder whose node died. The lock file: the holder's line "pid P on host H
// since T[, Slurm job J]", then its lease line.
//
// mpirun does not pass the lock's descriptor on to the ranks: killed with SIGKILL, a supervisor
// and its mpirun go, the lock with them, while the ranks finish their step and save for a second
// or two more -- time enough for a new run to start beside them (seen: two trainings' checkpoints
// interleaved, one removing the other's, metrics lines lost). So every rank also holds a shared
// flock on RUN_DIR/.ranks.lock while it lives (hold_rank_lock), and a new holder of the run lock
// waits, like for the lock, until it can take that one exclusively: until no rank of an earlier
// run is left.
#pragma once

#include <stdexcept>
#include <string>

namespace rm {

inline constexpr const char* kRunLockEnv = "RM_RUN_LOCK";

// The lock, or the ranks' lock, still held when the wait is over by processes of an earlier
// run of this same Slurm job (the holder's line names SLURM_JOB_ID; or ranks that outlived
// their launcher, inside a Slurm job): a requeue or a start retry that came before a slow node
// had ended them. Not bad input -- nothing about the job is wrong, and they will go -- but a
// failure of this start (exit 1: the batch script retries it, counted in
// resilience.max_restarts), where IoError would be exit 2 and end the job for good.
class RunDirStillHeld : public std::runtime_error {
 public:
  explicit RunDirStillHeld(const std::string& message) : std::runtime_error(message) {}
};

// Takes the lock of `run_dir` (which must exist) for this process, waiting up to wait_s seconds
// for another holder to exit (saying once that it waits), and records who holds it (pid, host,
// start time, Slurm job) in the lock file for the message of the next would-be holder. A holder
// that died without releasing is taken over with a message (after run_lock_lease_s() without
// renewal when it was on another host). Returns at once if
// this process, or the holder named by RM_RUN_LOCK (above), holds it already. Throws IoError naming
// the directory and the holder when the lock stays taken, or RunDirStillHeld (above) when what
// holds it is an earlier run of this Slurm job.
void lock_run_dir(const std::string& run_dir, double wait_s);

// A rank of the run in `run_dir` (which lock_run_dir has prepared): holds a shared lock on
// RUN_DIR/.ranks.lock until the process exits. Throws IoError if it cannot be opened or locked.
void hold_rank_lock(const std::string& run_dir);

// How many processes on this host hold RUN_DIR/.ranks.lock now (ranks of a run training in it),
// from /proc/locks: read only, so asking never gets in a starting run's way. -1 where this host
// cannot tell (no /proc/locks); 0 also when the ranks run on other hosts (a Slurm job's nodes).
int ranks_here_holding(const std::string& run_dir);

// Whether a process on this host holds the run lock of `run_dir` now (`ringmaster run`'s
// supervisor, also while no rank runs: starting them, or between restarts), from /proc/locks,
// read only like ranks_here_holding.
bool run_lock_held_here(const std::string& run_dir);

// For the holder of the run lock before it starts ranks again (a restart): waits up to wait_s
// seconds until no rank of the run is left (those of a lost host may outlive their mpirun);
// throws IoError naming the directory when some still are.
void wait_for_ranks_to_leave(const std::string& run_dir, double wait_s);

// How long a run waits for the lock: 90 s inside a Slurm job (a requeued job may start before
// the old one's processes are killed: KillWait is 30 s by default), 0 elsewhere (a second run
// started by hand is refused at once). RM_RUN_LOCK_WAIT_S (tests) sets the Slurm figure.
double run_lock_wait_s();

}  // namespace rm
