// resilience.max_restarts through the real binary: `ringmaster run` supervises its training
// and restarts it from the newest verified checkpoint when a rank dies, ending on the weights
// of an uninterrupted run; a failure that repeats is given up after the last restart.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: restart
run_dir: )" + dir.file("straight") +
                                   R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 2, async: false}
parallel: {threads_per_rank: 1, timeout_s: 30}
)");
}

class Restart : public ::testing::TestWithParam<int> {};  // ranks

// A rank SIGKILLed at step 7 (after the checkpoint of step 4): the supervisor restarts the job,
// which resumes from step 4 and ends bit for bit on the uninterrupted run's weights.
TEST_P(Restart, KilledRankIsRestartedFromTheCheckpoint) {
  const int ranks = GetParam();
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string np = " --nproc " + std::to_string(ranks);
  ASSERT_EQ(run_cli("run " + job + np, dir.path()).exit_code, 0);
  const std::string run = dir.file("restarted");
  // The fault reaches the ranks through cluster.env, which `run` sets for every rank.
  const std::string victim = std::to_string(ranks - 1);
  // Its own TMPDIR, to see the session bases Open MPI was given (launcher/mpi_session_dir.h).
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directories(tmp);
  const auto r = run_cli(
      "run " + job + np + " --fresh --set run_dir=" + run +
          " --set resilience.max_restarts=2 --set cluster.env.RM_TEST_FAULT=kill:" + victim + ":7",
      dir.path(), "TMPDIR=" + tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 1 of 2 from " + run + "/checkpoints/step_00000004"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resuming from " + run + "/checkpoints/step_00000004"), std::string::npos)
      << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
  // Every rank's end is marked for the supervisor with the attempt it belonged to: the restart
  // (base/rank_end.h).
  for (int r = 0; r < ranks; ++r) {
    const std::string marker = test::slurp(run + "/logs/rank-" + std::to_string(r) + ".ended");
    EXPECT_NE(marker.find(" attempt 1\n"), std::string::npos) << "rank " << r << ": " << marker;
  }
  // The restart is an event, and the killed rank's last words are in its log.
  EXPECT_NE(test::slurp(run + "/events.jsonl").find(R"("event":"restart")"), std::string::npos);
  EXPECT_NE(test::slurp(run + "/logs/rank-" + victim + ".log").find("RM_TEST_FAULT: "),
            std::string::npos);
  EXPECT_EQ(test::losses_by_step(run + "/metrics.jsonl"),
            test::losses_by_step(dir.file("straight/metrics.jsonl")));
  // Both launches of mpirun had a session base of their own under the user's parent, and each
  // was removed when its mpirun ended; one rank needs no mpirun.
  const std::string parent = tmp + "/rm-mpi." + std::to_string(::geteuid());
  if (ranks == 1) {
    EXPECT_FALSE(std::filesystem::exists(parent));
  } else {
    ASSERT_TRUE(std::filesystem::is_directory(parent)) << "mpirun was not given its own base";
    EXPECT_TRUE(std::filesystem::is_empty(parent)) << "a launch's base was left in " << parent;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Restart, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

// max_restarts 0 (the default): a failure is the end.
// A rank that dies once the job has finished (rank 1 SIGKILLed as it exits, after rank 0 wrote
// weights.bin and "finished"): the job is done, and `run` says so instead of spending a restart
// on resuming at the end to finish again (before: "finished", "restart", "resumed", "finished").
TEST(RestartAfterFinish, ARankDyingAsItExitsCostsNoRestart) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + " --nproc 2", dir.path()).exit_code, 0);
  const std::string run = dir.file("late");
  // savekill with a delay: at rank 1's 12th save event (the last save's last), a kill that comes
  // when the process exits.
  const auto r = run_cli("run " + job + " --nproc 2 --set run_dir=" + run +
                             " --set resilience.max_restarts=1 --set "
                             "cluster.env.RM_TEST_FAULT=savekill:1:12:600000000",
                         dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("the job finished (weights.bin written), then exited with code"),
            std::string::npos)
      << r.err;
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_EQ(events.find("\"event\":\"restart\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"event\":\"exit_after_finish\""), std::string::npos) << events;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

TEST(RestartOff, FailureIsFinal) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir), dir.path(), "RM_TEST_FAULT=kill:0:7");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.find("restart 1"), std::string::npos) << r.out;
}

// A failure that every attempt repeats (a divergence with on_nan: abort) is restarted
// max_restarts times, then given up with a message.
TEST(RestartLimit, RepeatedFailureGivesUp) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir) +
                             " --set optimizer.lr=1e30 --set optimizer.warmup_steps=0"
                             " --set optimizer.grad_clip=0 --set resilience.max_restarts=2",
                         dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 2 of 2 from the beginning"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("after 2 restarts (resilience.max_restarts); giving up"), std::string::npos)
      << r.err;
  // The restarts start over with --fresh, which keeps what tells why: every attempt's events and
  // rank logs (before: each restart wiped them, its own "restart" event among them).
  const std::string events = test::slurp(dir.file("straight/events.jsonl"));
  size_t restarts = 0, started = 0;
  for (size_t at = 0; (at = events.find("\"event\":\"restart\"", at)) != std::string::npos; ++at) {
    ++restarts;
  }
  for (size_t at = 0; (at = events.find("\"event\":\"started\"", at)) != std::string::npos; ++at) {
    ++started;
  }
  EXPECT_EQ(restarts, 2u) << events;
  EXPECT_EQ(started, 3u) << events;
  EXPECT_NE(events.find("\"event\":\"failed\""), std::string::npos) << events;
}

// Checkpoints that do not verify (a byte flipped in each) are passed over by every attempt and
// kept: the restart "from the beginning" starts over without --fresh (before: --fresh removed
// them, unsaid, where a read that failed for a moment -- a lost mount, EIO -- made them look
// damaged). Both attempts die at step 3, before a save would replace them.
TEST(RestartDamaged, CheckpointsThatDoNotVerifyAreKept) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_NE(run_cli("run " + job, dir.path(), "RM_TEST_FAULT=kill:0:11").exit_code, 0);
  const std::string ckpts = dir.file("straight/checkpoints");
  for (const char* step : {"step_00000004", "step_00000008"}) {
    const std::string shard = ckpts + "/" + step + "/shard_00000.bin";
    std::string bytes = test::slurp(shard);
    ASSERT_GT(bytes.size(), 1000u) << shard;
    bytes[bytes.size() / 2] ^= 0x01;
    dir.write(std::string("straight/checkpoints/") + step + "/shard_00000.bin", bytes);
  }
  const auto r = run_cli("run " + job + " --set resilience.max_restarts=1", dir.path(),
                         "RM_TEST_FAULT=kill:0:3,kill:0:3@1");
  EXPECT_EQ(r.exit_code, 137) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1 from the beginning (no checkpoint verifies)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::filesystem::exists(ckpts + "/step_00000004")) << r.out;
  EXPECT_TRUE(std::filesystem::exists(ckpts + "/step_00000008")) << r.out;
}

// A SIGTERM that comes after an attempt failed and before the restart has started it (here while
// `run` waits for the failed attempt's ranks to leave, held up by the test's own shared lock on
// .ranks.lock) stops the job: no restart that would train on without the stop it never got
// (before: the signal was dropped and the restart ran to its end).
TEST(RestartStop, AStopBetweenAttemptsIsNotDropped) {
  TempDir dir;
  const std::string run = dir.file("straight");
  const test::Child job =
      test::spawn_cli("run " + job_file(dir) + " --set resilience.max_restarts=1", dir.path(), "r",
                      "RM_TEST_FAULT=slowstep:0:400,kill:0:10");
  ASSERT_TRUE(test::wait_for_text(job.out, "step      2/12")) << test::slurp(job.out);
  // Held until the signal is sent, however slow the machine: then the restart may go on. It
  // must hold before the attempt dies (at step 10, 3.2 s of slowed steps away): said by a file.
  const std::string go = dir.file("go"), held = dir.file("held");
  const test::Child holder =
      test::spawn_shell("exec flock -s " + run + "/.ranks.lock timeout 120 sh -c 'echo held >" +
                            held + "; while [ ! -e " + go + " ]; do sleep 0.05; done'",
                        dir.path(), "lock");
  ASSERT_TRUE(test::wait_for_text(held, "held")) << "the lock holder never held the lock";
  ASSERT_EQ(test::slurp(job.out).find("restart 1 of 1"), std::string::npos)
      << "the attempt died before the lock was held (a machine this slow cannot run this test)";
  ASSERT_TRUE(test::wait_for_text(job.out, "restart 1 of 1")) << test::slurp(job.out);
  ::kill(job.pid, SIGTERM);
  dir.write("go", "");
  EXPECT_EQ(test::wait_exit(job), 137) << test::slurp(job.err);
  test::wait_exit(holder);
  const std::string err = test::slurp(job.err);
  EXPECT_NE(err.find("stopped by SIGTERM before restart 1: not restarted (the attempt before "
                     "failed with exit code 137)"),
            std::string::npos)
      << err;
  EXPECT_TRUE(test::logged_steps(run + "/metrics.jsonl").size() < 12) << test::slurp(job.out);
  EXPECT_NE(test::slurp(run + "/events.jsonl").find("\"before_restart\":1"), std::string::npos);
}

// max_restarts 0 and a rank killed by a signal: said, with where to look (before: exit 137 and
// nothing on the console or in events.jsonl).
TEST(RestartOff, ARankKilledBySignalIsNamed) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir), dir.path(), "RM_TEST_FAULT=kill:0:7");
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_NE(r.err.find("a rank was killed by SIGKILL (exit code 137), with nothing said"),
            std::string::npos)
      << r.err;
}

// Ranks that cannot start -- here rank 1 killed by SIGILL at start-up, every attempt, as a
// binary built for another CPU is; mpirun unable to execute the program gives the same 132 --
// are not restarted: the job ends at once with 132, why, and a "failed" event (before: taken for
// a rank killed mid-run, restarted max_restarts times, each failing the same way).
TEST(RestartLimit, RanksThatCannotStartAreNotRestarted) {
  TempDir dir;
  const std::string run = dir.file("straight");
  const auto r = run_cli("run " + job_file(dir) +
                             " --nproc 2 --set resilience.max_restarts=2"
                             " --set cluster.env.RM_TEST_FAULT=ill:1:0@0,ill:1:0@1,ill:1:0@2",
                         dir.path());
  EXPECT_EQ(r.exit_code, 132) << r.err << r.out;
  EXPECT_NE(r.err.find("the job's ranks did not start (exit code 132)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("restart 1 of 2"), std::string::npos) << r.out;
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_EQ(events.find("\"event\":\"restart\""), std::string::npos) << events;
  EXPECT_NE(events.find("the ranks did not start: not restarted"), std::string::npos) << events;
}

// ringmaster run through a link (an install that points a link at its current version) whose
// version is upgraded mid-run: the link moved to a new copy, the old one removed. The restart
// runs the program the link leads to now, and the job ends on the uninterrupted run's weights
// (before: it restarted through the old copy's resolved path, found nothing there, and gave up).
TEST(RestartAfterUpgrade, TheRestartRunsWhatTheLinkItWasRunThroughLeadsToNow) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  namespace fs = std::filesystem;
  fs::create_directories(dir.file("v1"));
  fs::create_directories(dir.file("v2"));
  fs::create_directories(dir.file("bin"));
  fs::copy_file(RINGMASTER_BIN, dir.file("v1/ringmaster"));
  fs::create_symlink(dir.file("v1/ringmaster"), dir.file("bin/ringmaster"));
  // The new version is in place before the run: mid-run only the link's rename and the old
  // copy's removal are left, which take microseconds (a copy of a sanitizer build's binary does
  // not, and the upgrade must land between step 2 and the kill at step 9).
  fs::copy_file(RINGMASTER_BIN, dir.file("v2/ringmaster"));
  fs::create_symlink(dir.file("v2/ringmaster"), dir.file("bin/next"));
  const std::string run = dir.file("upgraded");
  // The harness runs RINGMASTER_BIN: this wrapper runs the link instead, with the same words.
  const std::string through_link =
      "sh -c 'shift; exec " + dir.file("bin/ringmaster") + " \"$@\"' sh";
  test::CliResult r;
  std::thread runner([&] {
    r = run_cli("run " + job + " --set run_dir=" + run + " --set resilience.max_restarts=1",
                dir.path(), "RM_TEST_FAULT=slowstep:0:150,kill:0:9", through_link);
  });
  const bool reached = test::wait_for_steps(run + "/metrics.jsonl", 2);
  if (reached) {
    fs::rename(dir.file("bin/next"), dir.file("bin/ringmaster"));
    fs::remove(dir.file("v1/ringmaster"));
  }
  runner.join();
  ASSERT_TRUE(reached) << r.err << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("was replaced since this run started: the restart runs the program now "
                       "there"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("restart 1 of 1"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
}

}  // namespace
}  // namespace rm
