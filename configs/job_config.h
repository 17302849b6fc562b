// The typed job: what a YAML job file says once parsed, defaulted and validated.
//
// Field names are the YAML key names (model.width is JobConfig::model.width). Defaults here are
// the documented defaults; configs/schema.cc binds every field to its key, type, range and
// documentation, and is the single source of truth for docs/job-reference.md. Choice-valued keys
// are enums (configs/job_choices.h: their words and what each choice implies).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "configs/job_choices.h"

namespace rm {

struct ModelConfig {
  ModelType type = ModelType::kGpt;
  int vocab_size = 256;      // 256 = bytes of text
  int seq_len = 256;         // tokens per training sequence (GPT: its context length)
  int layers = 4;            // GPT: transformer blocks; MLP: hidden layers
  int heads = 4;             // GPT only
  int width = 256;           // GPT: embedding width; MLP: hidden width
  int mlp_embed = 32;        // MLP only: embedding width of each context token
  int mlp_context = 8;       // MLP only: previous tokens that predict each next token
  bool recompute = false;    // GPT only: keep each block's input, recompute the rest in backward
  int classifier_chunk_tokens = 0;  // GPT only: logits for this many tokens at a time; 0 = all
  double dropout = 0;  // GPT only: dropout probability on the embeddings and the branch outputs
  // Starting weights instead of the seed's (worker/initial_weights.h): a checkpoint, a run
  // directory or a .safetensors file; empty = none.
  std::string init_from;
};

struct DataConfig {
  DataFormat format = DataFormat::kText;
  std::vector<std::string> train;  // file paths or globs (relative to the working directory)
  std::vector<std::string> val;    // optional; empty -> split train by val_fraction
  double val_fraction = 0.1;
  std::string tokenizer;  // a GPT-2 BPE tokenizer's directory; empty -> a byte a token
  // A multiple-choice file (llm.c's eval format: HellaSwag) scored at each evaluation; empty ->
  // none.
  std::string choices;
};

// Whether a job has validation data: data.val's files, or the last val_fraction of train's.
inline bool has_validation_data(const DataConfig& d) {
  return !d.val.empty() || d.val_fraction > 0;
}

// train.eval_batches' bound (configs/schema.cc says why), which what suggests another
// eval_batches (planning/memory_fit.h, base/run_dir.h) keeps to as well.
inline constexpr int kMaxEvalBatches = 1000000;

struct TrainConfig {
  int64_t steps = 1000;
  int global_batch = 32;  // sequences per optimizer step, all ranks together
  int micro_batch = 8;    // sequences per forward/backward on one rank
  int eval_every = 100;   // 0 = never
  int eval_batches = 8;   // micro-batches of validation data per evaluation
  int log_every = 10;
};

struct OptimizerConfig {
  OptimizerName name = OptimizerName::kAdamW;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  LrScheduleKind schedule = LrScheduleKind::kCosine;
  double decay_fraction = 0.2;  // wsd: the share of train.steps, at the end, that decays
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 = off
};

struct ParallelConfig {
  Backend backend = Backend::kAuto;
  ShardMode shard = ShardMode::kNone;
  double bucket_mb = 25;
  bool overlap = true;
  int threads_per_rank = 0;  // 0 = cores / local ranks
  double timeout_s = 300;
  Precision precision = Precision::kFp32;
  Precision grad_reduce = Precision::kFp32;  // the element type gradients travel in
};

struct CheckpointConfig {
  int64_t every = 0;  // steps; 0 = only at the end and on signals
  int keep = 3;
  int64_t keep_every = 0;  // also keep every checkpoint whose step is a multiple of this
  bool keep_best = false;  // save and keep the checkpoint of the lowest validation loss
  int64_t memory_every = 0;  // steps between in-memory checkpoints (/dev/shm); 0 = off
  bool async = true;
  bool on_signal = true;
  OnSaveError on_error = OnSaveError::kStop;  // what a save's I/O error does
};

struct ResilienceConfig {
  int max_restarts = 0;  // `ringmaster run` restarts a failed job this many times
  bool shrink = false;   // a restart may go on with fewer ranks when hosts are lost
  double step_timeout_s = 0;     // 0 = off
  OnNan on_nan = OnNan::kAbort;
  // Skip an update whose loss or gradient norm is this many standard deviations above the mean
  // of the last 128 steps' (llm.c's -sl and -sg); 0 = off.
  double spike_loss_zscore = 0;
  double spike_norm_zscore = 0;
};

// What a run records about itself beyond metrics.jsonl and events.jsonl.
struct ObservabilityConfig {
  bool trace = false;          // each rank writes a Chrome trace of a window of steps
  int64_t trace_start = 3;     // the window's first step (1-based): after start-up effects
  int64_t trace_steps = 5;     // steps in the window
};

struct ClusterConfig {
  int nodes = 1;
  int tasks_per_node = 1;
  int gpus_per_node = 0;
  int cpus_per_task = 0;  // 0 = let Slurm decide
  std::string partition;
  std::string account;
  std::string qos;
  std::string time;  // Slurm time limit, e.g. "02:00:00"; empty = partition default
  std::string memory_per_node;  // Slurm --mem, e.g. "64G"; empty = not asked (configs/slurm_memory.h)
  double signal_grace_s = 120;
  std::vector<std::string> sbatch_extra;
  std::map<std::string, std::string> env;
};

struct JobConfig {
  std::string name = "job";
  std::string run_dir;  // default runs/<name>
  uint64_t seed = 1337;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimizerConfig optimizer;
  ParallelConfig parallel;
  CheckpointConfig checkpoint;
  ResilienceConfig resilience;
  ObservabilityConfig observability;
  ClusterConfig cluster;

  std::string source_path;  // the job file this came from ("" if built in code)
};

}  // namespace rm
