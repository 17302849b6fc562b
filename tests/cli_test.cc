// End to end through the real binary: validate, run, sample, eval, and bad input of every
// kind named in the foundation issue (exit 2, one clear message, nothing half-written).
#include <gtest/gtest.h>

#include <algorithm>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "worker/data/token_shard.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// A small GPT job on the shipped text, fast enough for a unit test.
std::string tiny_job(const TempDir& dir, const std::string& extra = "") {
  return dir.write("job.yaml", R"(name: tiny
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt, val_fraction: 0.1}
train: {steps: 30, global_batch: 8, micro_batch: 4, eval_every: 10, eval_batches: 2, log_every: 10}
optimizer: {lr: 3.0e-3, warmup_steps: 5}
)" + extra);
}

TEST(Cli, ValidateAcceptsTheShippedJobs) {
  TempDir dir;
  for (const char* job : {"configs/shakespeare.yaml", "configs/mlp.yaml"}) {
    const auto r = run_cli(std::string("validate ") + job, dir.path());
    EXPECT_EQ(r.exit_code, 0) << job << "\n" << r.err;
  }
}

TEST(Cli, ValidateReportsEveryErrorWithFileLineAndKey) {
  TempDir dir;
  const std::string job = dir.write("bad.yaml", "name: x\nmodel:\n  widht: 64\n  layers: -1\n");
  const auto r = run_cli("validate " + job, dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(job + ":3:3: model.widht"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("width"), std::string::npos) << "did-you-mean\n" << r.err;
  EXPECT_NE(r.err.find(job + ":4:11: model.layers"), std::string::npos) << r.err;
}

// A job for a cluster is checked on the ranks `submit` would give it too (before: validate
// passed cluster.nodes=3, which submit then refused for its batch arithmetic); --nproc says the
// job is meant for `run`.
TEST(Cli, ValidateChecksAClusterJobOnItsClusterRanks) {
  TempDir dir;
  const std::string job = tiny_job(dir);
  const auto three = run_cli("validate " + job + " --set cluster.nodes=3", dir.path());
  EXPECT_EQ(three.exit_code, 2) << three.out;
  EXPECT_NE(three.err.find("train.global_batch: as submitted, on 3 ranks (cluster.nodes x "
                           "cluster.tasks_per_node): "),
            std::string::npos)
      << three.err;
  const auto submit = run_cli("submit " + job + " --set cluster.nodes=3 --dry-run", dir.path());
  EXPECT_EQ(submit.exit_code, 2) << "validate and submit agree";
  const auto for_run = run_cli("validate " + job + " --set cluster.nodes=3 --nproc 1", dir.path());
  EXPECT_EQ(for_run.exit_code, 0) << for_run.err;
  const auto two = run_cli("validate " + job + " --set cluster.nodes=2", dir.path());
  EXPECT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("as submitted, on 2 ranks (cluster.nodes x cluster.tasks_per_node): ok"),
            std::string::npos)
      << two.out;
}

// Output that cannot be written fails the command that was to print it (before: `eval >
// /dev/full`, `status >&-` and the like exited 0 with nothing written).
TEST(Cli, OutputThatCannotBeWrittenFailsTheCommand) {
  TempDir dir;
  const std::string run = dir.file("run");
  ASSERT_EQ(run_cli("run " + tiny_job(dir) + " --set train.steps=2", dir.path()).exit_code, 0);
  for (const std::string& to : {std::string(">/dev/full"), std::string(">&-")}) {
    for (const char* command : {"status ", "ckpt list "}) {
      const std::string err = dir.file("err");
      const int status = std::system(
          (std::string(RINGMASTER_BIN) + " " + command + run + " " + to + " 2>" + err).c_str());
      EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << command << to;
      EXPECT_NE(test::slurp(err).find("ringmaster: cannot write the output: "), std::string::npos)
          << command << to << ": " << test::slurp(err);
    }
  }
  EXPECT_EQ(run_cli("status " + run, dir.path()).exit_code, 0);
}

TEST(Cli, RunTrainsWritesMetricsAndWeightsThenSampleAndEvalUseThem) {
  TempDir dir;
  const auto r = run_cli("run " + tiny_job(dir), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step     30/30"), std::string::npos) << r.out;
  const std::string run = dir.file("run");
  ASSERT_TRUE(fs::exists(run + "/weights.bin"));
  ASSERT_TRUE(fs::exists(run + "/config.yaml"));

  // metrics.jsonl: one object per step with the documented keys, val_loss on eval steps.
  std::ifstream metrics(run + "/metrics.jsonl");
  std::string line;
  int lines = 0;
  double first_loss = 0, last_loss = 0;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    ++lines;
    EXPECT_EQ(j["step"].get<int>(), lines);
    for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s", "step_ms"}) {
      ASSERT_TRUE(j.contains(key)) << key << " missing in " << line;
    }
    EXPECT_EQ(j.contains("val_loss"), lines % 10 == 0) << line;
    (lines == 1 ? first_loss : last_loss) = j["loss"].get<double>();
  }
  EXPECT_EQ(lines, 30);
  EXPECT_NEAR(first_loss, std::log(256.0), 0.3);
  EXPECT_LT(last_loss, first_loss - 1.0) << "30 steps should learn byte frequencies";

  // The resolved config is a valid job with every default filled in.
  const auto v = run_cli("validate " + run + "/config.yaml", dir.path());
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(test::slurp(run + "/config.yaml").find("bucket_mb"), std::string::npos);

  const auto s = run_cli("sample " + run + " --prompt ROMEO: --tokens 50 --seed 4", dir.path());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("ROMEO:", 0), 0u);
  EXPECT_EQ(s.out.size(), 6u + 50u + 1u);
  EXPECT_EQ(run_cli("sample " + run + " --prompt ROMEO: --tokens 50 --seed 4", dir.path()).out,
            s.out)
      << "the same seed gives the same text";
  // Filtering that leaves one token is greedy: --top-k 1, or a nucleus smaller than any token.
  const auto greedy =
      run_cli("sample " + run + " --prompt ROMEO: --tokens 20 --temperature 0", dir.path());
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  for (const char* filter : {" --top-k 1", " --top-p 1e-6", " --top-k 3 --top-p 1e-6"}) {
    const auto f =
        run_cli("sample " + run + " --prompt ROMEO: --tokens 20 --seed 9" + filter, dir.path());
    ASSERT_EQ(f.exit_code, 0) << filter << "\n" << f.err;
    EXPECT_EQ(f.out, greedy.out) << filter;
  }
  const auto bad_p = run_cli("sample " + run + " --top-p 0", dir.path());
  EXPECT_EQ(bad_p.exit_code, 2);
  EXPECT_NE(bad_p.err.find("--top-p: '0' is not in (0, 1]"), std::string::npos) << bad_p.err;

  const auto e =
      run_cli("eval " + run + " --data data/tinyshakespeare.txt --max-tokens 3200", dir.path());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  double loss = 0;
  long long tokens = 0;
  ASSERT_EQ(std::sscanf(e.out.c_str(), "loss=%lf tokens=%lld", &loss, &tokens), 2) << e.out;
  EXPECT_EQ(tokens, 3200);
  EXPECT_LT(loss, std::log(256.0) - 1.0);

  // Running the same job again resumes from its last checkpoint: nothing left to do.
  const auto again = run_cli("run " + dir.file("job.yaml"), dir.path());
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resuming from"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("step     30/30"), std::string::npos) << "no step is run twice";
}

TEST(Cli, MissingJobFile) {
  TempDir dir;
  const auto r = run_cli("run " + dir.file("nope.yaml"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("nope.yaml")), std::string::npos) << r.err;
}

TEST(Cli, MissingDataFileWritesNothing) {
  TempDir dir;
  const auto r =
      run_cli("run " + tiny_job(dir) + " --set data.train=" + dir.file("gone.txt"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("gone.txt")), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run"))) << "nothing may be written for a job that fails";
}

// Step graphs are on by default (worker/step_graph.h): a value meant as off must not leave them
// on, nor write anything, on every backend (here, no GPU) and under mpirun alike.
TEST(Cli, AnUnclearStepGraphSwitchWritesNothing) {
  TempDir dir;
  for (const char* nproc : {"", " --nproc 2"}) {
    const auto r = run_cli("run " + tiny_job(dir) + nproc, dir.path(), "RM_CUDA_GRAPH=off");
    EXPECT_EQ(r.exit_code, 2) << nproc << r.err;
    EXPECT_NE(r.err.find("RM_CUDA_GRAPH=off: expected 0 (off) or 1"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("run"))) << "nothing may be written for a job that fails";
  }
  EXPECT_EQ(run_cli("run " + tiny_job(dir), dir.path(), "RM_CUDA_GRAPH=0").exit_code, 0);
}

// The cuda kernels' switches (kernels/gpu_switches.h) likewise: refused before anything is
// written, naming the variable -- not thrown from the first step's first attention call on a
// GPU, after the run directory was made. Each switch's values are taken.
TEST(Cli, AnUnclearKernelSwitchWritesNothing) {
  TempDir dir;
  for (const char* bad :
       {"RM_CUDNN_ATTENTION=yes", "RM_CUDNN_ATTENTION=3", "RM_CUDA_CE_ROW_IN_SMEM=2",
        "RM_FLASH_DKV_FRAGMENTS=0", "RM_FLASH_DQ_FRAGMENTS=12"}) {
    const auto r = run_cli("run " + tiny_job(dir), dir.path(), bad);
    EXPECT_EQ(r.exit_code, 2) << bad << r.err;
    EXPECT_NE(r.err.find(std::string(bad) + ": expected "), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("run"))) << bad;
  }
  EXPECT_EQ(run_cli("run " + tiny_job(dir), dir.path(),
                    "RM_CUDNN_ATTENTION=2 RM_CUDA_CE_ROW_IN_SMEM=1 RM_FLASH_DKV_FRAGMENTS=2 "
                    "RM_FLASH_DQ_FRAGMENTS=")
                .exit_code,
            0);
}

TEST(Cli, BadTokenShardHeader) {
  TempDir dir;
  std::string bytes(2048, '\0');
  bytes[0] = 7;  // magic 7, not 20240520
  const std::string shard = dir.write("bad.bin", bytes);
  const auto r = run_cli(
      "run " + tiny_job(dir) + " --set data.format=tokens --set data.train=" + shard, dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(shard), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("magic"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

TEST(Cli, UnwritableRunDirectory) {
  TempDir dir;
  // A regular file where a parent directory should be: fails even for root.
  dir.write("blocker", "x");
  const auto r =
      run_cli("run " + tiny_job(dir) + " --set run_dir=" + dir.file("blocker/run"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("blocker/run")), std::string::npos) << r.err;
}

TEST(Cli, TokenShardsTrainAndEval) {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 6000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7) % 300));
  write_token_shard(dir.file("train_000.bin"), tokens);
  write_token_shard(dir.file("val_000.bin"), tokens);
  const std::string job = tiny_job(dir, "");
  const auto r = run_cli("run " + job + " --set data.format=tokens --set model.vocab_size=300" +
                             " --set data.train=" + dir.file("train_*.bin") +
                             " --set data.val=" + dir.file("val_*.bin"),
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto e =
      run_cli("eval " + dir.file("run") + " --data " + dir.file("val_000.bin"), dir.path());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("tokens="), std::string::npos);
}

// A misspelt command says which and lists the commands, rather than CLI11's "A subcommand is
// required".
TEST(Cli, UnknownCommandIsNamed) {
  TempDir dir;
  const auto r = run_cli("sumbit configs/shakespeare.yaml", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'sumbit'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  submit "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  status "), std::string::npos) << r.err;
  EXPECT_EQ(run_cli("", dir.path()).exit_code, 2);
}

// `status` of a finished local run; of something that is not a run: exit 2 and why.
// Started by a process that ignores SIGCHLD (the setting survives exec): the run's children are
// still waited for (before: the kernel reaped them, waitpid failed with ECHILD, and a finished
// run exited 1).
TEST(Cli, ARunStartedWithSigchldIgnoredStillWaitsForItsRanks) {
  TempDir dir;
  const auto r = run_cli("run " + tiny_job(dir) + " --nproc 2", dir.path(), "",
                         "python3 -c 'import os, signal, sys; "
                         "signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                         "os.execv(sys.argv[1], sys.argv[1:])'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("done; weights in"), std::string::npos) << r.out;
}

TEST(Cli, StatusOfARunAndOfANonRun) {
  TempDir dir;
  ASSERT_EQ(run_cli("run " + tiny_job(dir), dir.path()).exit_code, 0);
  const auto r = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("job         tiny"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step        30 / 30 (100.0%), finished"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("state       finished, 20"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("val_loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoints/step_00000030 (step 30, verified)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("restarts    0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("slurm"), std::string::npos) << "never submitted:\n" << r.out;
  // A crash that tore metrics.jsonl's last line (the file is written line by line, not atomically)
  // does not make the finished run read as one step short.
  const std::string metrics = dir.file("run/metrics.jsonl");
  const std::string lines = test::slurp(metrics);
  const size_t last = lines.rfind('\n', lines.size() - 2);
  ASSERT_NE(last, std::string::npos);
  fs::resize_file(metrics, last + 1 + (lines.size() - last) / 2);
  const auto torn = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(torn.exit_code, 0) << torn.err;
  EXPECT_NE(torn.out.find("step        30 / 30 (100.0%), finished"), std::string::npos) << torn.out;
  // A step past train.steps (the job file's steps lowered since, or a hostile line) is said so,
  // not as a percentage over 100.
  dir.write("run/metrics.jsonl", lines + "{\"step\": 9223372036854775807, \"loss\": 1.0}\n");
  const auto past = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(past.exit_code, 0) << past.err;
  EXPECT_NE(past.out.find("step        9223372036854775807 / 30 (past train.steps), finished"),
            std::string::npos)
      << past.out;
  // A last step whose loss was not finite (written as null, the update skipped) is said so
  // (before: "loss 0.0000", in just the case a user looks for).
  dir.write("run/metrics.jsonl", lines + "{\"step\": 30, \"loss\": null, \"skipped\": true}\n");
  const auto nan = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(nan.exit_code, 0) << nan.err;
  EXPECT_NE(nan.out.find("loss        not finite (step 30, skipped)"), std::string::npos)
      << nan.out;
  // Damaged lines give no absurd figures: a step that is no int64 is passed over (before:
  // "(step -1)"), a huge loss is said in a few digits (before: 309 of them), and an evaluation
  // whose value was not finite is said so (before: an older evaluation's shown in its place).
  dir.write("run/metrics.jsonl", lines +
                                     "{\"step\": 30, \"loss\": 1e308, \"val_loss\": null}\n"
                                     "{\"step\": 18446744073709551615, \"loss\": 1.0}\n"
                                     "{\"step\": -5, \"loss\": 1.0}\n");
  const auto damaged = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(damaged.exit_code, 0) << damaged.err;
  EXPECT_NE(damaged.out.find("loss        1e+308 (step 30), val_loss not finite (step 30)"),
            std::string::npos)
      << damaged.out;
  // A config.yaml that holds no key is damage, not a job of defaults (before: job "job", 1000
  // steps, exit 0).
  dir.write("run/config.yaml", "# emptied\n");
  const auto empty = run_cli("status " + dir.file("run"), dir.path());
  EXPECT_EQ(empty.exit_code, 2) << empty.out;
  EXPECT_NE(empty.err.find("run/config.yaml: holds no key"), std::string::npos) << empty.err;
  const auto bad = run_cli("status " + dir.path(), dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not a run directory"), std::string::npos) << bad.err;
}

// A finished run whose 'finished' event was lost (torn as the job shut down) is finished all
// the same: weights.bin and the last step say so (before: "killed? run the same command"). A
// finished run whose Slurm job is still ending is finished, the job's state beside it (before:
// "waiting as Slurm job", or "training" while RUNNING). scontrol is a stub on PATH here.
TEST(Cli, StatusOfAFinishedRunWithoutItsEventOrWithItsSlurmJobEnding) {
  TempDir dir;
  ASSERT_EQ(run_cli("run " + tiny_job(dir), dir.path()).exit_code, 0);
  const std::string events = dir.file("run/events.jsonl");
  const std::string lines = test::slurp(events);
  const size_t last = lines.rfind('\n', lines.size() - 2);
  ASSERT_NE(lines.find("\"finished\"", last), std::string::npos);
  fs::resize_file(events, last + 1 + 20);  // the 'finished' line torn
  const auto r = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("state       finished, weights.bin written, no 'finished' event"),
            std::string::npos)
      << r.out;
  dir.write("run/events.jsonl", lines);
  fs::create_directories(dir.file("run/slurm"));
  dir.write("run/slurm/job_id", "12345\n");
  fs::create_directories(dir.file("bin"));
  const std::string stub =
      dir.write("bin/scontrol", "#!/bin/sh\necho 'JobId=12345 JobState=COMPLETING Reason=None'\n");
  fs::permissions(stub, fs::perms::owner_all);
  const auto ending =
      run_cli("status " + dir.file("run"), dir.path(), "PATH=" + dir.file("bin") + ":$PATH");
  ASSERT_EQ(ending.exit_code, 0) << ending.err;
  EXPECT_NE(ending.out.find("state       finished, 20"), std::string::npos) << ending.out;
  EXPECT_NE(ending.out.find("(Slurm job 12345: COMPLETING)"), std::string::npos) << ending.out;
}

// While `ringmaster run` holds the run directory and no rank runs (starting them, or between a
// failed attempt and its restart) the run is not "killed? run the same command" (nor "not
// started" before its first event): a process holds the run lock here (flock(1) takes it as
// the supervisor does).
TEST(Cli, StatusWhileTheRunLockIsHeldAndNoRankRuns) {
  TempDir dir;
  ASSERT_EQ(run_cli("run " + tiny_job(dir) + " --set train.steps=10", dir.path()).exit_code, 0);
  // Not finished (no weights.bin), and its last event a 'restart'.
  std::ofstream(dir.file("run/events.jsonl"), std::ios::app)
      << R"({"time":"2026-12-02T00:00:00.000Z","event":"restart","reason":"failed","exit_code":137})"
      << "\n";
  fs::remove(dir.file("run/weights.bin"));
  const std::string status = "status " + dir.file("run");
  const auto away = run_cli(status, dir.path());
  EXPECT_NE(away.out.find("killed? run the same command"), std::string::npos) << away.out;
  const auto held = run_cli(status, dir.path(), "", "flock " + dir.file("run/.lock"));
  ASSERT_EQ(held.exit_code, 0) << held.err;
  EXPECT_NE(held.out.find("state       starting or restarting its ranks (a ringmaster run holds "
                          "the directory and no rank of it runs here now; last: 'restart', "
                          "2026-12-02T00:00:00.000Z)"),
            std::string::npos)
      << held.out;
}

// A run that failed says why where it can (a rank killed by a signal: said by `run`, which
// records it), and where the ranks' own words are (before: "failed (exit code 137)" alone).
TEST(Cli, StatusOfAFailedRunSaysWhyAndWhereTheLogsAre) {
  TempDir dir;
  const auto r = run_cli("run " + tiny_job(dir), dir.path(), "RM_TEST_FAULT=kill:0:5");
  ASSERT_EQ(r.exit_code, 137) << r.err;
  const auto status = run_cli("status " + dir.file("run"), dir.path());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("state       failed (exit code 137), "), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find(": a rank was killed by SIGKILL; the ranks' logs: " + dir.file("run") +
                            "/logs/"),
            std::string::npos)
      << status.out;
}

// A FIFO where a rank's log goes is refused, named (before: the rank waited for a reader for
// ever, and the run with it).
TEST(Cli, AFifoAsARankLogIsRefusedNotWaitedOn) {
  TempDir dir;
  fs::create_directories(dir.file("run/logs"));
  ASSERT_EQ(::mkfifo(dir.file("run/logs/rank-0.log").c_str(), 0644), 0);
  const auto r = run_cli("run " + tiny_job(dir), dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("run/logs/rank-0.log: a FIFO, not a regular file"), std::string::npos)
      << r.err;
}

// A run_dir that an #SBATCH line cannot carry: one line naming the job file, the path shown
// escaped (a newline in it split the message over two lines).
TEST(Cli, SubmitRefusesARunDirectoryAnSbatchLineCannotCarryInOneLine) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", R"(name: tiny
run_dir: ")" + dir.file("runs/a\\nb") + R"("
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 10}
)");
  const auto r = run_cli("submit " + job + " --dry-run", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string line = "ringmaster: " + job + ": run_dir '" + dir.file("runs/a\\nb") +
                           "' holds a double quote, a backslash or a control character";
  EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// `submit` when sbatch fails: its message and exit 1, and no job id recorded. A run directory
// the submit made is removed (before: it stayed, holding a job that never ran, which a submit
// of the job edited then took for another job's run); one that was there stays.
TEST(Cli, SubmitReportsAFailingSbatchAndRemovesTheRunDirectoryItMade) {
  TempDir dir;
  fs::create_directories(dir.file("bin"));
  const std::string stub = dir.write("bin/sbatch",
                                     "#!/bin/sh\necho 'sbatch: error: Batch job "
                                     "submission failed: Invalid partition'\nexit 1\n");
  fs::permissions(stub, fs::perms::owner_all);
  const std::string path = "PATH=" + dir.file("bin") + ":$PATH";
  const std::string job = dir.write("job.yaml", R"(name: tiny
run_dir: )" + dir.file("runs/new") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 10}
)");
  const auto r = run_cli("submit " + job, dir.path(), path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("sbatch failed (exit code 1): sbatch: error: Batch job submission failed: "
                       "Invalid partition"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(dir.file("runs/new") + ", made for it, is removed"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir.file("runs")))
      << "runs/, made by the submit and left empty, is still there";
  // The job edited (another model) is submitted as a new run, not refused as another job's.
  const std::string edited = dir.write("job2.yaml", test::slurp(job) + "optimizer: {lr: 0.01}\n");
  dir.write("bin/sbatch", "#!/bin/sh\necho 4242\n");
  fs::permissions(stub, fs::perms::owner_all);
  const auto ok = run_cli("submit " + edited, dir.path(), path);
  EXPECT_EQ(ok.exit_code, 0) << ok.err << ok.out;
  EXPECT_EQ(test::slurp(dir.file("runs/new/slurm/job_id")), "4242\n");

  // A run directory that was there before stays, with the job's files.
  dir.write("bin/sbatch", "#!/bin/sh\necho 'sbatch: error: down'\nexit 1\n");
  fs::permissions(stub, fs::perms::owner_all);
  fs::create_directories(dir.file("run"));
  const auto again = run_cli("submit " + tiny_job(dir), dir.path(), path);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err.find("is removed"), std::string::npos) << again.err;
  EXPECT_TRUE(fs::exists(dir.file("run/slurm/job.sbatch")));
  EXPECT_FALSE(fs::exists(dir.file("run/slurm/job_id")));
}

}  // namespace
}  // namespace rm
