// One live run per run directory (base/run_lock.h), through the real binary: a second run on
// the directory of a live one is refused at once, touching nothing; a run killed with SIGKILL
// leaves no stale lock; and inside a Slurm job a run waits for the old holder to go (a requeue
// that starts before the old allocation's processes are gone), then resumes from its
// checkpoint. Where flock does not reach other hosts, the lease in the lock file does
// (base/run_lease.h): a lock whose holder on another host stopped renewing it is taken over,
// and one still renewed is refused.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// Long enough (3000 steps, a few seconds) that the other process acts while it runs.
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: lock
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 3000, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1000}
checkpoint: {every: 50, keep: 2}
parallel: {threads_per_rank: 1, timeout_s: 20}
)");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RunLock, SecondRunOnALiveRunDirectoryIsRefused) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child first = test::spawn_cli("run " + job, dir.path());
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 5));
  for (const char* extra : {"", " --fresh", " --nproc 2"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto second = run_cli("run " + job + extra, dir.path());
    EXPECT_LT(seconds_since(t0), 10.0) << extra;
    EXPECT_EQ(second.exit_code, 2) << extra << "\n" << second.err;
    EXPECT_NE(second.err.find(dir.file("run") + ": in use by another run (pid "), std::string::npos)
        << second.err;
    EXPECT_NE(second.err.find("set run_dir to another directory"), std::string::npos);
  }
  EXPECT_EQ(test::wait_exit(first), 0) << test::slurp(first.err);
  // The first run was not disturbed: every step once, its checkpoints and weights in place.
  EXPECT_TRUE(test::each_step_once(dir.file("run/metrics.jsonl"), 3000));
  EXPECT_TRUE(fs::exists(dir.file("run/weights.bin")));
  EXPECT_TRUE(fs::exists(dir.file("run/checkpoints/step_00003000")));
  // A clean exit releases the lease: the next run need not wait for it to expire.
  const std::string lock = test::slurp(dir.file("run/.lock"));
  EXPECT_NE(lock.find("\nreleased\n"), std::string::npos) << lock;
}

TEST(RunLock, AKilledRunLeavesNoStaleLock) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child first = test::spawn_cli("run " + job, dir.path());
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 60));  // a checkpoint at 50
  // SIGKILL the whole run: the supervisor and the rank it started (its process group).
  ::kill(-first.pid, SIGKILL);
  ::kill(first.pid, SIGKILL);
  test::wait_exit(first);
  // The rank may outlive the supervisor by a moment: the lock is held until it is gone.
  const auto t0 = std::chrono::steady_clock::now();
  test::CliResult again;
  do {
    again = run_cli("run " + job, dir.path());
  } while (again.exit_code == 2 && seconds_since(t0) < 10);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resuming from"), std::string::npos) << again.out;
  EXPECT_NE(again.err.find("taking over the lock of a run that did not release it (pid " +
                           std::to_string(first.pid)),
            std::string::npos)
      << again.err;
}

// SIGKILL of `run`'s supervisor alone: its mpirun goes too, and the lock with them, but the
// ranks may finish their step and save for a second or two more (mpirun passes them no
// descriptor of the lock). A run started then trained beside them: the two runs' checkpoints
// interleaved, one removing the other's, and metrics lines were lost. Each rank holds a shared
// lock on RUN_DIR/.ranks.lock while it lives, which a new run waits for.
TEST(RunLock, RanksThatOutliveTheirKilledLauncherKeepTheDirectory) {
  TempDir dir;
  const std::string job = job_file(dir) + " --nproc 2";
  // The protocol, deterministically: a "rank" (this process) still holds its lock.
  fs::create_directories(dir.file("run"));
  const int rank = ::open(dir.file("run/.ranks.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(rank, 0);
  ASSERT_EQ(::flock(rank, LOCK_SH), 0);
  const test::CliResult refused = run_cli("run " + job, dir.path());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("ranks of an earlier run still run in it"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(dir.file("run/metrics.jsonl")));
  ::close(rank);
  // The real thing (rank 0's checkpoint I/O slowed, 0.2 s a beat, so that the save of the stop
  // mpirun's SIGTERM asks for often outlasts mpirun): tried again and again, as a user or a
  // script would, the run never starts beside the old ranks, and goes on once they are gone.
  const test::Child first =
      test::spawn_cli("run " + job, dir.path(), "bg", "RM_TEST_FAULT=slowio:0:200000");
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 5));
  ::kill(first.pid, SIGKILL);  // the supervisor alone, as the OOM killer or a user might
  test::wait_exit(first);
  const auto t0 = std::chrono::steady_clock::now();
  test::CliResult again;
  do {
    again = run_cli("run " + job, dir.path());
  } while (again.exit_code == 2 && seconds_since(t0) < 60);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(test::each_step_once(dir.file("run/metrics.jsonl"), 3000));
}

TEST(RunLock, InsideASlurmJobARunWaitsForTheOldHolder) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child old = test::spawn_cli("run " + job, dir.path(), "old");
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 5));
  // The requeued job starts while the old one still runs ...
  const test::Child requeued = test::spawn_cli("run " + job, dir.path(), "new", "SLURM_JOB_ID=42");
  const auto t0 = std::chrono::steady_clock::now();
  while (test::slurp(requeued.err).find("waiting up to 90 s") == std::string::npos &&
         seconds_since(t0) < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(test::slurp(requeued.err).find("in use by another run"), std::string::npos)
      << test::slurp(requeued.err);
  // ... and the old one is stopped by its signal (as Slurm's preemption does), saving a
  // checkpoint on the way out; the new one then takes over from it.
  ::kill(old.pid, SIGTERM);
  EXPECT_EQ(test::wait_exit(old), 75) << test::slurp(old.err);
  EXPECT_EQ(test::wait_exit(requeued), 0) << test::slurp(requeued.err);
  EXPECT_NE(test::slurp(requeued.out).find("resuming from"), std::string::npos);
  EXPECT_TRUE(test::each_step_once(dir.file("run/metrics.jsonl"), 3000));
  const std::string lock = test::slurp(dir.file("run/.lock"));
  EXPECT_NE(lock.find(", Slurm job 42\n"), std::string::npos) << lock;
}

// Inside a Slurm job, a lock still held when the wait is over by an earlier run of the same job
// (a requeue, or the batch script's start retry, that came before a slow node had ended the old
// processes) is a failed start, exit 1, which the batch script retries and counts; not bad
// input (exit 2), which would end the job for good. Held by another job, it stays bad input.
TEST(RunLock, InsideASlurmJobItsOwnEarlierRunStillThereIsAFailedStartNotBadInput) {
  TempDir dir;
  const std::string job = job_file(dir) + " --set train.steps=5";
  fs::create_directories(dir.file("run"));
  // The old holder, deterministically: this process holds the lock, its line naming job 42.
  const int lock = ::open(dir.file("run/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  const std::string holder = "pid 4242 on host oldnode since 2026-11-24T01:00:00Z, Slurm job 42\n";
  ASSERT_EQ(::pwrite(lock, holder.data(), holder.size(), 0), static_cast<ssize_t>(holder.size()));
  const auto t0 = std::chrono::steady_clock::now();
  const auto same = run_cli("run " + job, dir.path(), "SLURM_JOB_ID=42 RM_RUN_LOCK_WAIT_S=1");
  EXPECT_GE(seconds_since(t0), 1.0) << "gave up without waiting";
  EXPECT_EQ(same.exit_code, 1) << same.err;
  EXPECT_NE(same.err.find(dir.file("run") + ": in use by another run (" +
                          holder.substr(0, holder.size() - 1) +
                          "), still after 1 s: processes of an earlier run of this Slurm job "
                          "(42) outlived it"),
            std::string::npos)
      << same.err;
  const auto other = run_cli("run " + job, dir.path(), "SLURM_JOB_ID=43 RM_RUN_LOCK_WAIT_S=1");
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("set run_dir to another directory"), std::string::npos) << other.err;
  ::close(lock);
  // Ranks of an earlier run that outlived their launcher: inside a Slurm job, this job's own.
  const int rank = ::open(dir.file("run/.ranks.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(rank, 0);
  ASSERT_EQ(::flock(rank, LOCK_SH), 0);
  const auto ranks = run_cli("run " + job, dir.path(), "SLURM_JOB_ID=42 RM_RUN_LOCK_WAIT_S=1");
  EXPECT_EQ(ranks.exit_code, 1) << ranks.err;
  EXPECT_NE(ranks.err.find("ranks of an earlier run still run in it"), std::string::npos)
      << ranks.err;
  EXPECT_NE(ranks.err.find("this Slurm job (42)"), std::string::npos) << ranks.err;
  ::close(rank);
  // Nothing was written by the refused starts; once the old processes are gone, it runs.
  EXPECT_FALSE(fs::exists(dir.file("run/metrics.jsonl")));
  const auto after = run_cli("run " + job, dir.path(), "SLURM_JOB_ID=42 RM_RUN_LOCK_WAIT_S=1");
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(test::each_step_once(dir.file("run/metrics.jsonl"), 5));
}

// The lock file a node leaves when it dies holding the lock: its lease, never renewed again.
std::string dead_holder_lock(int64_t n) {
  return "pid 4242 on host deadnode since 2026-11-24T01:00:00Z, Slurm job 7\nlease deadnode 4242 " +
         std::to_string(n) + "\n";
}

TEST(RunLock, ALockOfADeadHostIsTakenOverWhenItsLeaseRunsOut) {
  TempDir dir;
  const std::string job = job_file(dir);
  fs::create_directories(dir.file("run"));
  dir.write("run/.lock", dead_holder_lock(17));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r =
      run_cli("run " + job + " --set train.steps=20", dir.path(), "RM_RUN_LOCK_LEASE_S=2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(seconds_since(t0), 2.0) << "took over without waiting out the lease";
  EXPECT_NE(r.err.find(dir.file("run") +
                       ": taking over the lock of a run on another host (pid "
                       "4242 on host deadnode since 2026-11-24T01:00:00Z, Slurm job 7): its lease "
                       "was not renewed for 2"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(test::each_step_once(dir.file("run/metrics.jsonl"), 20));
}

// A live holder on host "othernode", pid 4242, whose flock this host cannot see: a shell loop
// that renews the lease in `lock` as a holder does, holding no flock here. Kill it when done.
test::Child hold_from_othernode(const std::string& lock, const TempDir& dir) {
  const std::string renew =
      "n=1; while true; do printf 'pid 4242 on host othernode since "
      "2026-11-24T01:00:00Z\\nlease othernode 4242 %d\\n' $n 1<> " +
      lock + "; n=$((n+1)); sleep 0.2; done";
  return test::spawn_shell(renew, dir.path());
}

// A live holder on another host whose flock this host cannot see (NFS with local_lock=flock):
// played by a shell loop that renews the lease as a holder does, holding no flock here.
TEST(RunLock, ALiveHolderOnAnotherHostIsRefusedThoughFlockMissesIt) {
  TempDir dir;
  const std::string job = job_file(dir);
  fs::create_directories(dir.file("run"));
  const std::string lock = dir.file("run/.lock");
  const test::Child holder = hold_from_othernode(lock, dir);
  ASSERT_TRUE(test::wait_for_text(lock, "lease othernode 4242 2"));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli("run " + job, dir.path(), "RM_RUN_LOCK_LEASE_S=2");
  ::kill(holder.pid, SIGKILL);
  test::wait_exit(holder);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_NE(r.err.find(dir.file("run") +
                       ": in use by another run on another host (pid 4242 on "
                       "host othernode since 2026-11-24T01:00:00Z): its lease in " +
                       lock + " is being renewed"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run/metrics.jsonl"))) << "the refused run wrote";
  EXPECT_FALSE(fs::exists(dir.file("run/config.yaml"))) << "the refused run wrote";
}

// `run --hosts` whose hostfile puts rank 0 on another host than the supervisor's: the rank finds
// RM_RUN_LOCK naming that host and pid, and the lock file's lease held by them, and trains under
// its supervisor's lock (before: it took the lock itself, found its own supervisor's lease live
// on another host, and refused, exit 2: such a run could not start). A variable whose holder
// does not hold the lease (another pid) is no licence: refused as before. The supervisor is
// played by a shell loop renewing the lease as a holder on "othernode" does.
TEST(RunLock, ARankZeroOnAnotherHostThanItsSupervisorTrainsUnderItsLock) {
  TempDir dir;
  const std::string job = job_file(dir);
  fs::create_directories(dir.file("run"));
  const std::string run = fs::canonical(dir.file("run")).string();
  const std::string lock = run + "/.lock";
  const test::Child holder = hold_from_othernode(lock, dir);
  ASSERT_TRUE(test::wait_for_text(lock, "lease othernode 4242 2"));
  const std::string worker = "worker " + job + " --set train.steps=20";
  // Open MPI session directories of the test's own (CMakeLists.txt, rm_own_mpi_sessions says why).
  const std::string mpirun =
      "mpirun -np 1 --oversubscribe --allow-run-as-root --mca orte_tmpdir_base " + dir.path();
  const auto stranger = run_cli(
      worker, dir.path(), "RM_RUN_LOCK_LEASE_S=2 RM_RUN_LOCK='4243 othernode " + run + "'", mpirun);
  const auto rank0 = run_cli(
      worker, dir.path(), "RM_RUN_LOCK_LEASE_S=2 RM_RUN_LOCK='4242 othernode " + run + "'", mpirun);
  ::kill(holder.pid, SIGKILL);
  test::wait_exit(holder);
  EXPECT_EQ(stranger.exit_code, 2) << stranger.err;
  EXPECT_NE(stranger.err.find("in use by another run on another host (pid 4242"), std::string::npos)
      << stranger.err;
  EXPECT_EQ(rank0.exit_code, 0) << rank0.err;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 20));
  // The variable as a supervisor before the host was in it wrote it ("PID DIR"), which a rank
  // restarted from a binary upgraded in place gets: its holder, an ancestor, holds the lock.
  const std::string old = dir.write(
      "old.sh", "#!/bin/bash\nexport RM_RUN_LOCK=\"$$ " + run + "\"\nexec " + mpirun + " \"$@\"\n");
  fs::permissions(old, fs::perms::owner_all);
  const auto upgraded = run_cli(worker + " --set train.steps=30", dir.path(), "",
                                "flock -n " + run + "/.lock " + old);
  EXPECT_EQ(upgraded.exit_code, 0) << upgraded.err;
}

}  // namespace
}  // namespace rm
