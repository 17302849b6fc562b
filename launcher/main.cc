// `ringmaster`: parses the command line and hands each subcommand to launcher/cmd_*.cc.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/lsan_mpi_program.h"  // LeakSanitizer and Open MPI (ASan builds only)
#include "io/io_error.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/threads.h"
#include "launcher/child_process.h"
#include "launcher/cli_checks.h"
#include "launcher/commands.h"
#include "worker/test_hooks.h"

namespace {

// More ranks than any machine or cluster runs: a typo, refused as the command line is read.
constexpr uint64_t kMaxRanks = uint64_t{1} << 20;

void add_job_options(CLI::App* cmd, rm::JobArgs& a) {
  cmd->add_option("job", a.job, "YAML job file")->required();
  cmd->add_option("--set", a.sets, "override a key: --set model.width=512 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--nproc", a.nproc, "data-parallel ranks")
      ->transform(rm::cli::whole_number(1, kMaxRanks));
}

void add_hosts_option(CLI::App* cmd, std::string& hosts, const char* ranks_flag = "--nproc") {
  cmd->add_option(
         "--hosts", hosts,
         "run the ranks across these hosts: an Open MPI hostfile ('node slots=N' lines); " +
             std::string(ranks_flag) + " defaults to its slots")
      ->check(rm::cli::non_empty());
}

void add_fresh_flag(CLI::App* cmd, bool& fresh) {
  cmd->add_flag("--fresh", fresh, "start over in a run directory that already holds a run");
}

// Where a command that uses a trained model runs it (launcher/model_placement.h).
void add_placement_options(CLI::App* cmd, std::string* backend, std::string* precision) {
  cmd->add_option("--backend", *backend,
                  "where the model runs (default: the job's parallel.backend; auto takes a GPU "
                  "when one is visible)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--precision", *precision,
                  "the weights' precision in the forward (default: the job's on a GPU, fp32 on "
                  "the cpu)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

void add_rank_options(CLI::App* cmd, rm::RunArgs& a) {
  add_job_options(cmd, a.job);
  add_fresh_flag(cmd, a.fresh);
  cmd->add_option("--from", a.from,
                  "resume from this checkpoint directory (the run's newer checkpoints, of the line "
                  "it leaves, are removed once it has resumed)")
      ->check(rm::cli::recorded_path());
}

}  // namespace

int main(int argc, char** argv) {
  // A SIGCHLD ignored by whatever started this process survives exec, and the kernel then reaps
  // the children itself: waitpid on mpirun or a rank failed with ECHILD (a finished run exited
  // 1) and pclose on sbatch returned -1 (a submitted job's run directory was removed).
  ::signal(SIGCHLD, SIG_DFL);
  // First, before anything else runs: the BLAS kernels for this CPU. May re-execute this
  // process with OPENBLAS_CORETYPE set (kernels/cpu/blas_kernels.h says why and when).
  rm::cpu::select_blas_kernels(argv);
  rm::remember_invoked_path(argv[0]);  // a restart finds the program through it (child_process.h)
  CLI::App app{"Ringmaster: distributed training orchestrator"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  rm::JobArgs validate;
  auto* v =
      app.add_subcommand("validate", "check a job file; exit 0, or print every error and exit 2");
  add_job_options(v, validate);
  add_hosts_option(v, validate.hosts);

  rm::PlanArgs plan;
  auto* pl = app.add_subcommand(
      "plan", "per shard mode: memory, step time, checkpoint interval on a cluster; recommends one");
  add_job_options(pl, plan.job);
  pl->add_option("--cluster", plan.cluster, "cluster file (configs/clusters/*.yaml); default: this host");

  rm::RunArgs run;
  auto* r = app.add_subcommand("run", "train a job: here, or on --nproc ranks under mpirun");
  add_rank_options(r, run);
  add_hosts_option(r, run.job.hosts);

  rm::RunArgs worker;
  worker.worker = true;
  auto* w = app.add_subcommand("worker", "one rank of a job, started by mpirun or srun --mpi=pmix");
  add_rank_options(w, worker);

  rm::SubmitArgs submit;
  auto* sb = app.add_subcommand(
      "submit", "submit a job to Slurm: render RUN_DIR/slurm/job.sbatch and sbatch it");
  add_job_options(sb, submit.job);
  // Parsed, to be refused with the keys to set instead (cmd_submit), but not offered.
  sb->get_option("--nproc")->group("");
  sb->add_flag("--dry-run", submit.dry_run, "print the batch script; write and submit nothing");
  add_fresh_flag(sb, submit.fresh);

  rm::StatusArgs status;
  auto* st = app.add_subcommand(
      "status", "where a run stands: step, loss, speed, ETA, checkpoint, restarts, Slurm state");
  st->add_option("run_dir", status.run_dir, "run directory")->required();

  rm::ReportArgs report;
  auto* rp = app.add_subcommand(
      "report", "one HTML page of plots and facts over runs: loss, lr, speed, step time, events");
  rp->add_option("run_dirs", report.run_dirs, "run directories (plots overlay them)")
      ->required()
      ->check(rm::cli::non_empty());
  rp->add_option("-o,--output", report.output, "output file (default RUN_DIR/report.html)")
      ->transform(rm::cli::output_file());

  rm::TraceArgs trace;
  auto* tr = app.add_subcommand(
      "trace", "merge a run's per-rank traces into one file for Perfetto or chrome://tracing");
  tr->add_option("run_dir", trace.run_dir, "run directory")
      ->required()
      ->check(rm::cli::non_empty());
  tr->add_option("-o,--output", trace.output, "output file (default RUN_DIR/trace.json)")
      ->transform(rm::cli::output_file());

  rm::SampleArgs sample;
  auto* s = app.add_subcommand("sample", "generate text from a run's weights (or a checkpoint's)");
  s->add_option("path", sample.run_dir, "run directory or checkpoint directory")
      ->required()
      ->check(rm::cli::non_empty());
  auto* prompt = s->add_option(
      "--prompt", sample.prompt,
      "text to continue (default: a newline); a model without a tokenizer whose vocabulary is "
      "not 256 bytes takes token ids, space-separated (default: 50256, GPT-2's <|endoftext|>, "
      "for GPT-2's vocabulary, else 0)");
  s->add_option("--tokens", sample.tokens, "tokens to generate")
      ->transform(rm::cli::whole_number());
  s->add_option("--temperature", sample.sampling.temperature, "0 = greedy")
      ->check(rm::cli::real_at_least(0.0));
  s->add_option("--top-k", sample.sampling.top_k,
                "sample among the K most likely tokens only; 0 = all")
      ->transform(rm::cli::whole_number());
  s->add_option("--top-p", sample.sampling.top_p,
                "sample among the most likely tokens up to this much probability (nucleus); 1 = "
                "all")
      ->check(rm::cli::share());
  s->add_option("--seed", sample.seed, "sampling seed")
      ->transform(rm::cli::whole_number(0, std::numeric_limits<uint64_t>::max()));
  s->add_option("--tokenizer", sample.tokenizer,
                "GPT-2 tokenizer directory for the prompt and the output (default: the job's "
                "data.tokenizer)")
      ->check(rm::cli::non_empty());
  add_placement_options(s, &sample.backend, &sample.precision);

  rm::EvalArgs eval;
  auto* e = app.add_subcommand(
      "eval", "a run's model on a file: mean loss per token, or multiple-choice accuracy");
  e->add_option("path", eval.run_dir, "run directory or checkpoint directory")
      ->required()
      ->check(rm::cli::non_empty());
  auto* eval_data = e->add_option("--data", eval.data, "text file or llm.c token shard")
                        ->check(rm::cli::non_empty());
  auto* eval_choices =
      e->add_option(
           "--choices", eval.choices,
           "multiple-choice file in llm.c's eval format (hellaswag_val.bin): prints the accuracy")
          ->check(rm::cli::non_empty());
  eval_data->excludes(eval_choices);
  const uint64_t most = std::numeric_limits<int64_t>::max();
  e->add_option("--max-tokens", eval.max_tokens,
                "--data: score at most this many tokens, in whole windows of the model's seq_len "
                "(0 = all)")
      ->transform(rm::cli::whole_number(0, most))
      ->excludes(eval_choices);
  e->add_option("--max-examples", eval.max_examples,
                "--choices: score the first this many examples (0 = all)")
      ->transform(rm::cli::whole_number(0, most))
      ->excludes(eval_data);
  e->add_option("--tokenizer", eval.tokenizer,
                "--data: GPT-2 tokenizer directory that encodes a text file (default: the job's "
                "data.tokenizer)")
      ->check(rm::cli::non_empty())
      ->excludes(eval_choices);
  add_placement_options(e, &eval.backend, &eval.precision);

  rm::TokenizeArgs tokenize;
  auto* tk = app.add_subcommand(
      "tokenize", "encode a text file with a GPT-2 tokenizer into an llm.c token shard");
  tk->add_option("text", tokenize.text, "text file")->required();
  tk->add_option("--tokenizer", tokenize.tokenizer,
                 "directory with encoder.json and vocab.bpe (or vocab.json and merges.txt)")
      ->required();
  tk->add_option("-o,--output", tokenize.output, "shard to write (data.format: tokens)")
      ->required()
      ->transform(rm::cli::output_file());

  auto* bench = app.add_subcommand("bench", "benchmarks that print figures beside a baseline");
  bench->require_subcommand(1);
  rm::BenchTrainArgs bench_train;
  auto* bt = bench->add_subcommand("train", "tokens/s and GFLOP/s of a job beside raw sgemm");
  add_job_options(bt, bench_train.job);
  add_hosts_option(bt, bench_train.job.hosts);
  bt->add_option("--steps", bench_train.steps, "timed steps")->transform(rm::cli::whole_number(1));
  bt->add_option("--profile", bench_train.profile,
                 "then N steps with every kernel and GEMM timed alone (synchronised): a table of "
                 "where a step's time goes")
      ->transform(rm::cli::whole_number(0));
  bt->add_option("--warmup", bench_train.warmup, "untimed steps first")
      ->transform(rm::cli::whole_number(0));

  rm::BenchCpuArgs bench_cpu;
  auto* bcpu = bench->add_subcommand(
      "cpu", "the CPU, its BLAS kernels and why, measured FMA peak beside a 1024^3 sgemm");
  // More threads than CPUs cannot raise a peak (100000 crashed in the OpenMP runtime).
  bcpu->add_option("--threads", bench_cpu.threads,
                   "threads for the all-core figures (at most the CPUs this process may use)")
      ->transform(rm::cli::whole_number(1, static_cast<uint64_t>(rm::cpu::available_cpus())));
  bcpu->add_option("--n", bench_cpu.n, "sgemm size")->transform(rm::cli::whole_number(1, 65536));

  rm::BenchAllreduceArgs bench_ar;
  auto* ba = bench->add_subcommand(
      "allreduce", "all-reduce busbw of Ringmaster's communicator beside plain MPI_Allreduce");
  ba->add_option("--np", bench_ar.nproc, "ranks (default 2, or the hostfile's slots)")
      ->transform(rm::cli::whole_number(1, kMaxRanks));
  add_hosts_option(ba, bench_ar.hosts, "--np");
  ba->add_option("--max-mb", bench_ar.max_mb, "largest message in MiB (from 4 KiB, doubling)")
      ->transform(rm::cli::whole_number(1, 4096));
  ba->add_option("--seconds", bench_ar.seconds, "timed seconds per size and implementation")
      ->transform(rm::cli::real_at_least(0.001));
  ba->add_option("--backend", bench_ar.backend, "mpi (host buffers) or nccl (GPU buffers)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  ba->add_option("--op", bench_ar.op,
                 "all_reduce (default), reduce_scatter or all_gather (mpi backend), beside MPI's own")
      ->check(CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather"}));
  ba->add_flag("--hugetlb", bench_ar.hugetlb,
               "run the ranks with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (the other baseline)");

  rm::BenchCkptArgs bench_ckpt;
  auto* bc = bench->add_subcommand(
      "ckpt", "checkpoint save GiB/s beside plain write+fsync, async stall, restore time");
  bc->add_option("--dir", bench_ckpt.dir, "directory to write in (on the disk to measure)");
  bc->add_option("--gib", bench_ckpt.gib, "checkpoint size in GiB")
      ->check(rm::cli::real_at_least(0.001, 256.0));  // CLI::Range let NaN through
  bc->add_option("--ranks", bench_ckpt.ranks, "shard files per checkpoint")
      ->transform(rm::cli::whole_number(1, 64));
  bc->add_option("--repeats", bench_ckpt.repeats, "repetitions (medians are reported)")
      ->transform(rm::cli::whole_number(1, 100));

  auto* ckpt = app.add_subcommand("ckpt", "list, verify, inspect and export checkpoints");
  ckpt->require_subcommand(1);
  rm::CkptArgs ckpt_args;
  auto* cl =
      ckpt->add_subcommand("list", "a run's checkpoints: step, time, size, verified or why not");
  cl->add_option("run_dir", ckpt_args.path, "run directory")
      ->required()
      ->check(rm::cli::non_empty());
  auto* cv = ckpt->add_subcommand(
      "verify", "check every file and checksum; exit 0, or 1 naming the bad file");
  cv->add_option("path", ckpt_args.path,
                 "checkpoint directory, or a run directory (all its checkpoints)")
      ->required()
      ->check(rm::cli::non_empty());
  auto* ci =
      ckpt->add_subcommand("inspect", "tensors, shapes, training state and job of a checkpoint");
  ci->add_option("path", ckpt_args.path,
                 "checkpoint directory, or a run directory (its newest checkpoint that verifies)")
      ->required()
      ->check(rm::cli::non_empty());
  auto* ce = ckpt->add_subcommand("export", "write a checkpoint's model as one file");
  ce->add_option("path", ckpt_args.path,
                 "checkpoint directory, or a run directory (its weights.bin, or its newest "
                 "checkpoint that verifies while it is unfinished)")
      ->required()
      ->check(rm::cli::non_empty());
  ce->add_option("--format", ckpt_args.format,
                 "safetensors (Hugging Face's GPT2LMHeadModel names), llmc (llm.c's model file, "
                 "fp32) or llmc-bf16 (the same in bf16, for llm.c's GPU trainer)")
      ->check(CLI::IsMember({"safetensors", "llmc", "llmc-bf16"}));
  ce->add_option("-o,--output", ckpt_args.output, "output file")
      ->required()
      ->transform(rm::cli::output_file());

  auto* docs = app.add_subcommand("docs", "print generated documentation");
  docs->require_subcommand(1);
  auto* docs_ref = docs->add_subcommand("job-reference", "the job file reference (Markdown)");

  // CLI11 answers a misspelt command with "A subcommand is required"; say what was wrong.
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  const auto known = [&](const std::string& name) {
    return std::any_of(commands.begin(), commands.end(),
                       [&](const CLI::App* c) { return c->get_name() == name; });
  };
  if (argc < 2 || (argv[1][0] != '-' && !known(argv[1]))) {
    if (argc >= 2) std::fprintf(stderr, "ringmaster: unknown command '%s'\n", argv[1]);
    std::fprintf(stderr, "usage: ringmaster COMMAND [ARGS...]; the commands:\n");
    for (const CLI::App* c : commands) {
      std::fprintf(stderr, "  %-10s %s\n", c->get_name().c_str(), c->get_description().c_str());
    }
    std::fprintf(stderr, "`ringmaster COMMAND --help` describes one.\n");
    return rm::kExitBadInput;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& h) {
    return app.exit(h);
  } catch (const CLI::CallForAllHelp& h) {
    return app.exit(h);
  } catch (const CLI::ParseError& err) {
    app.exit(err);
    return rm::kExitBadInput;
  }

  const std::vector<std::string> args(argv + 1, argv + argc);
  run.argv = bench_train.argv = bench_ar.argv = args;
  validate.nproc_given = v->get_option("--nproc")->count() > 0;
  sample.prompt_given = prompt->count() > 0;
  run.job.nproc_given = r->get_option("--nproc")->count() > 0;
  plan.job.nproc_given = pl->get_option("--nproc")->count() > 0;
  submit.job.nproc_given = sb->get_option("--nproc")->count() > 0;
  bench_train.job.nproc_given = bt->get_option("--nproc")->count() > 0;
  bench_ar.nproc_given = ba->get_option("--np")->count() > 0;
  try {
    rm::install_test_hooks_from_env();  // tests only: every RM_TEST_* hook (worker/test_hooks.h)
  } catch (const rm::IoError& e) {
    std::fprintf(stderr, "ringmaster: %s\n", e.what());
    return rm::kExitBadInput;
  }
  const auto dispatch = [&]() -> int {
    if (*v) return rm::cmd_validate(validate);
    if (*r) return rm::cmd_run(run);
    if (*pl) return rm::cmd_plan(plan);
    if (*w) return rm::cmd_run(worker);
    if (*sb) return rm::cmd_submit(submit);
    if (*st) return rm::cmd_status(status);
    if (*rp) return rm::cmd_report(report);
    if (*tr) return rm::cmd_trace(trace);
    if (*s) return rm::cmd_sample(sample);
    if (*e) return rm::cmd_eval(eval);
    if (*tk) return rm::cmd_tokenize(tokenize);
    if (*bt) return rm::cmd_bench_train(bench_train);
    if (*ba) return rm::cmd_bench_allreduce(bench_ar);
    if (*bcpu) return rm::cmd_bench_cpu(bench_cpu);
    if (*bc) return rm::cmd_bench_ckpt(bench_ckpt);
    if (*cl) return rm::cmd_ckpt_list(ckpt_args);
    if (*cv) return rm::cmd_ckpt_verify(ckpt_args);
    if (*ci) return rm::cmd_ckpt_inspect(ckpt_args);
    if (*ce) return rm::cmd_ckpt_export(ckpt_args);
    if (*docs_ref) return rm::cmd_docs_job_reference();
    return rm::kExitBadInput;
  };
  int code = rm::kExitFailure;
  try {
    code = dispatch();
  } catch (const std::exception& ex) {
    // Commands report expected failures themselves; this is the last line of defence so that
    // nothing escapes as an abort with a core dump.
    rm::print_error(ex.what());
    return rm::kExitFailure;
  }
  // What a command prints is what it is for (eval's scores, status, a list): output that could
  // not be written (a full disk, /dev/full, a closed stdout) fails it, instead of exit 0 with an
  // empty file. Not the training's: a run's result is its directory, and `run` goes on when
  // nobody reads its console (cmd_run.cc).
  if (!*r && !*w) {
    const bool flush_failed = std::fflush(stdout) != 0;
    const int err = errno;
    if (flush_failed || std::ferror(stdout)) {
      rm::print_error(std::string("cannot write the output: ") +
                      (flush_failed ? std::strerror(err) : "a write to it failed"));
      return code == rm::kExitOk ? rm::kExitFailure : code;
    }
  }
  return code;
}
