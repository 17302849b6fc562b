// The subcommands of `ringmaster`. Each returns the process exit code (exit_codes.h) and
// reports bad input as one clear message on stderr; main.cc only parses the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/token_sampler.h"

namespace rm {

struct JobArgs {
  std::string job;                // the YAML job file
  std::vector<std::string> sets;  // --set key.path=value overrides, in order
  int nproc = 1;                  // data-parallel ranks
  bool nproc_given = false;       // --nproc was on the command line
  std::string hosts;              // --hosts: Open MPI hostfile (launcher/hostfile.h)
};

int cmd_validate(const JobArgs& args);

struct RunArgs {
  JobArgs job;
  bool fresh = false;
  bool worker = false;            // `ringmaster worker`: must be started by mpirun or srun
  std::string from;               // --from: resume from this checkpoint directory
  std::vector<std::string> argv;  // the command line after the program name, to re-exec
};
int cmd_run(const RunArgs& args);

// `ringmaster submit JOB`: validates the job (as `run` does, plus its cluster section), writes
// RUN_DIR/config.yaml and RUN_DIR/slurm/job.sbatch, and calls sbatch (launcher/slurm_script.h).
struct SubmitArgs {
  JobArgs job;             // nproc is ignored: cluster.nodes x cluster.tasks_per_node ranks
  bool dry_run = false;    // print the script; write and submit nothing
  bool fresh = false;      // start over in a run directory that holds a run
};
int cmd_submit(const SubmitArgs& args);

// `ringmaster status RUN_DIR`: step / total, losses, speed, ETA, newest verified checkpoint,
// restarts and why; under Slurm the job id and its state. Exit 0, or 2 if not a run directory.
struct StatusArgs {
  std::string run_dir;
};
int cmd_status(const StatusArgs& args);

// `ringmaster report RUN_DIR [RUN_DIR ...] [-o FILE]`: one self-contained HTML page (facts,
// jobs, SVG plots with events marked, events table) over one or more runs, written atomically
// to FILE (default RUN_DIR/report.html of the first). Exit 0, or 2 naming a directory that is not
// a run (nothing written).
struct ReportArgs {
  std::vector<std::string> run_dirs;
  std::string output;
};
int cmd_report(const ReportArgs& args);

// `ringmaster trace RUN_DIR [-o FILE]`: merges the ranks' Chrome traces (observability.trace)
// into one file, by default RUN_DIR/trace.json, written atomically (launcher/trace_merge.h).
// Exit 0 (ranks it could not merge are named on stderr), or 2 naming what is missing or bad
// (nothing written).
struct TraceArgs {
  std::string run_dir;
  std::string output;
};
int cmd_trace(const TraceArgs& args);

struct SampleArgs {
  std::string run_dir;
  std::string prompt = "\n";
  bool prompt_given = false;  // --prompt given: models that take ids start from a default id
  int tokens = 200;
  SamplingOptions sampling;  // temperature, top_k, top_p
  uint64_t seed = 1337;
  std::string tokenizer;  // empty = the run's data.tokenizer
  std::string backend;    // auto, cpu or cuda; empty = the job's (launcher/model_placement.h)
  std::string precision;  // fp32 or bf16; empty = the job's on a GPU, fp32 on the cpu
};
int cmd_sample(const SampleArgs& args);

struct EvalArgs {
  std::string run_dir;
  std::string data;        // the mean loss per token over this file's windows, or
  std::string choices;     // the accuracy on this multiple-choice file (one of the two)
  int64_t max_tokens = 0;  // 0 = the whole file
  int64_t max_examples = 0;  // --choices: 0 = all
  std::string tokenizer;   // empty = the run's data.tokenizer
  std::string backend;     // auto, cpu or cuda; empty = the job's (launcher/model_placement.h)
  std::string precision;   // fp32 or bf16; empty = the job's on a GPU, fp32 on the cpu
};
int cmd_eval(const EvalArgs& args);

// `ringmaster tokenize TEXT --tokenizer DIR -o SHARD`: one text file encoded into one llm.c
// token shard (data.format: tokens), written atomically.
struct TokenizeArgs {
  std::string text;
  std::string tokenizer;
  std::string output;
};
int cmd_tokenize(const TokenizeArgs& args);

struct BenchTrainArgs {
  JobArgs job;
  int steps = 10;
  int warmup = 2;
  int profile = 0;  // steps run after the timed ones with every compute call timed (0: none)
  std::vector<std::string> argv;  // the command line after the program name, to re-exec
};
int cmd_bench_train(const BenchTrainArgs& args);

struct BenchCpuArgs {
  int threads = 0;  // 0: the OpenMP default (all cores)
  int n = 1024;     // sgemm size (n x n x n)
  int reps = 5;     // timed sgemm calls (median)
};
int cmd_bench_cpu(const BenchCpuArgs& args);

struct BenchAllreduceArgs {
  int nproc = 2;
  int max_mb = 256;
  double seconds = 0.4;  // timed seconds per size and implementation
  bool hugetlb = false;  // run the ranks with GLIBC_TUNABLES=glibc.malloc.hugetlb=1
  std::string backend = "mpi";  // mpi (host buffers) | nccl (device buffers, one GPU per rank)
  std::string op = "all_reduce";  // | reduce_scatter | all_gather (mpi backend)
  bool nproc_given = false;     // --np was on the command line
  std::string hosts;            // --hosts: Open MPI hostfile; ranks default to its slots
  std::vector<std::string> argv;
};
int cmd_bench_allreduce(const BenchAllreduceArgs& args);

struct BenchCkptArgs {
  std::string dir = "runs/bench-ckpt";  // where the files are written (and then removed)
  double gib = 1.0;                     // checkpoint size: parameters + Adam moments
  int ranks = 2;                        // shard files per checkpoint
  int repeats = 3;                      // timed repetitions of each measurement (medians)
};
int cmd_bench_ckpt(const BenchCkptArgs& args);

// `ringmaster ckpt ...`: PATH is a checkpoint directory (RUN_DIR/checkpoints/step_N) or, where
// noted, a run directory.
struct CkptArgs {
  std::string path;
  std::string format = "safetensors";  // export: safetensors, llmc or llmc-bf16
  std::string output;                  // export: -o FILE
};
int cmd_ckpt_list(const CkptArgs& args);     // path: a run directory
int cmd_ckpt_verify(const CkptArgs& args);   // exit 0, or exit 1 naming the bad file
int cmd_ckpt_inspect(const CkptArgs& args);  // tensors, shapes, state and job
int cmd_ckpt_export(const CkptArgs& args);   // whole model to one safetensors file

// `ringmaster plan JOB [--cluster FILE]`: memory, step time and checkpoint interval per shard
// mode on a cluster (planning/step_plan.h), and a recommendation. Exit 0, or 2 on a bad job or
// cluster file.
struct PlanArgs {
  JobArgs job;          // nproc: ranks of this host when no cluster file is given
  std::string cluster;  // cluster file (configs/cluster_spec.h); "" = this host
};
int cmd_plan(const PlanArgs& args);

int cmd_docs_job_reference();

}  // namespace rm
