#include "configs/schema.h"
#include "configs/slurm_memory.h"
#include "configs/slurm_time.h"

#include "configs/yaml_format.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace rm {
namespace {

// The allowed-value helpers keep the table to one line per key.
Constraint any() {
  return {};
}
Constraint at_least(double min) {
  Constraint c;
  c.min = min;
  return c;
}
Constraint above(double min) {
  Constraint c = at_least(min);
  c.min_open = true;
  return c;
}
Constraint between(double min, double max, bool max_open = false) {
  Constraint c = at_least(min);
  c.max = max;
  c.max_open = max_open;
  return c;
}
Constraint above_up_to(double min, double max) {
  Constraint c = between(min, max);
  c.min_open = true;
  return c;
}
// A choice-valued key: its words are its enum's (configs/job_choices.h), filled in by
// job_schema() from the field, so the table cannot list other words than the loader accepts.
Constraint one_of_its_choices() {
  return {};
}
Constraint noted(std::string_view note) {
  Constraint c;
  c.note = note;
  return c;
}
Constraint checked(std::string (*check)(const std::string&), std::string_view note) {
  Constraint c = noted(note);
  c.check = check;
  return c;
}

// The job name becomes a directory name (run_dir) and the Slurm job name.
std::string check_name(const std::string& v) {
  static const std::regex re("[A-Za-z0-9._-]+");
  if (v.empty()) return "must be non-empty";
  // A path component holds at most NAME_MAX (255) bytes on Linux file systems; checked first,
  // so that `runs/<name>` also stays within the 4096-byte limit every string value has (a
  // longer name made a resolved job that did not load back: found by configs/job_fuzz.cc).
  if (v.size() > 255) {
    return "must be at most 255 bytes (it names a directory), got " + std::to_string(v.size()) +
           " bytes";
  }
  if (v == "." || v == "..") {
    return "must not be '" + v + "': as runs/" + v + " it would name " +
           (v == "." ? "runs/ itself" : "the directory above runs/") + ", not a run directory";
  }
  if (!std::regex_match(v, re)) {
    return "must use only letters, digits, '.', '_' and '-' (it names a directory), got '" + v +
           "'";
  }
  return "";
}

// Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; caught here rather than after
// the job has queued for a day.
std::string check_slurm_time(const std::string& v) {
  if (v.empty() || slurm_time_seconds(v) >= 0) return "";
  return "must be a Slurm time limit (MIN, HH:MM:SS, D-HH:MM:SS or UNLIMITED, at most 100 "
         "years), got '" +
         v + "'";
}

// A node's memory as `--mem` takes it; a typo ("64GB", "1.5G") would otherwise reach sbatch.
// 0 is Slurm's "all of each node's memory".
std::string check_slurm_memory(const std::string& v) {
  if (v.empty() || parse_slurm_memory(v) >= 0) return "";
  return "must be a Slurm memory size (an integer with an optional K, M, G or T; no suffix is "
         "MB; 0 = all of each node's memory), got '" +
         v + "'";
}

// Partition, account and QOS names go into #SBATCH lines: Slurm's own names are letters, digits,
// '.', '_' and '-', and several partitions are separated by commas. Anything else (a space, a
// quote, ';', '$', a newline) cannot be a valid value, so it is refused here rather than by
// sbatch after the job was written, or worse, by a shell.
std::string check_slurm_name(const std::string& v) {
  static const std::regex re(R"([A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*)");
  if (v.empty() || std::regex_match(v, re)) return "";
  return "must be a Slurm name (letters, digits, '.', '_', '-'; several separated by ','), "
         "got '" +
         v + "'";
}

// RM_KEY(model.width, ...) binds the key "model.width" to JobConfig::model.width: the key path
// is the member path, stringified.
#define RM_KEY(member, allowed, doc)                                               \
  KeySpec {                                                                        \
#member, [](JobConfig & c) -> FieldRef { return &c.member; }, allowed, doc, "" \
  }
#define RM_KEY_DEFAULT(member, allowed, default_note, doc)                                   \
  KeySpec {                                                                                  \
#member, [](JobConfig & c) -> FieldRef { return &c.member; }, allowed, doc, default_note \
  }

std::vector<KeySpec> build_schema() {
  return {
      RM_KEY(name, checked(check_name, "letters, digits, `.`, `_`, `-`"),
             "Job name; names the run directory and the Slurm job."),
      RM_KEY_DEFAULT(run_dir, any(), "runs/<name>",
                     "Directory for checkpoints, logs and the resolved job (relative to the "
                     "working directory)."),
      RM_KEY(seed, any(),
             "Seed of every random draw (the initial weights, the data order, dropout's masks); "
             "the same seed "
             "draws the same on any number of ranks."),

      RM_KEY(model.type, one_of_its_choices(),
             "Model family: `gpt` (decoder-only transformer) or `mlp` (next-token classifier "
             "over a fixed context)."),
      RM_KEY(model.vocab_size, at_least(2),
             "Number of token ids; 256 for raw bytes (data.format text)."),
      RM_KEY(model.seq_len, at_least(1),
             "Tokens per training sequence; gpt: also its context length. Every position of a "
             "sequence is a prediction target."),
      RM_KEY(model.layers, at_least(1), "gpt: transformer blocks; mlp: hidden layers."),
      RM_KEY(model.heads, at_least(1),
             "gpt: attention heads (model.width must be divisible by it); ignored by mlp."),
      RM_KEY(model.width, at_least(1), "gpt: embedding width; mlp: hidden layer width."),
      RM_KEY(model.mlp_embed, at_least(1),
             "mlp: embedding width of each context token; ignored by gpt."),
      RM_KEY(model.mlp_context, at_least(1),
             "mlp: how many previous tokens predict each next token (positions near the start "
             "of a sequence see zero-padding); ignored by gpt."),
      RM_KEY(model.recompute, any(),
             "gpt: activation recomputation. Forward keeps only each block's input; backward "
             "runs the block's forward again just before its backward. A block's activations "
             "shrink from ~16 x width + heads x seq_len values per token to width, for one more "
             "forward of the blocks per step (~+30% compute); the results are bit-identical. "
             "Ignored by mlp."),
      RM_KEY(model.classifier_chunk_tokens, at_least(0),
             "gpt: the classifier (logits, softmax, cross-entropy and their gradient) takes this "
             "many tokens at a time instead of the whole micro-batch; 0 = all at once. The "
             "logits then hold chunk x vocab_size values instead of micro_batch x seq_len x "
             "vocab_size (GPT-2's vocabulary, 16 sequences of 1024 tokens, bf16: 1.6 GB, 0.4 GB "
             "at 4096). Each chunk after the first adds a read and write of the embedding's "
             "gradient (vocab_size x width floats), and the loss and that gradient are summed "
             "in a different order (not bit-identical to 0). Ignored by mlp."),
      RM_KEY(model.dropout, between(0, 1, /*max_open=*/true),
             "gpt: dropout probability in training on the embeddings' sum and on each block's "
             "attention and MLP outputs before they join the residual stream (GPT-2's embd_pdrop "
             "and resid_pdrop; the attention's probabilities are not dropped). A kept value is "
             "scaled by 1 / (1 - p), as PyTorch's. Masks are keyed by (seed, global sample index, "
             "site, position), so they are the same on any number of ranks, when model.recompute "
             "runs a forward again, and on resume; p is rounded to a multiple of 1/65536. "
             "Evaluation and sampling drop nothing. 0 = off. Ignored by mlp."),
      RM_KEY(model.init_from, any(),
             "Start from these weights instead of the seed's random ones (fine-tuning): a "
             "checkpoint directory, a run directory (its newest checkpoint, which must verify), a "
             "`.safetensors` file as `ringmaster ckpt export` writes it (gpt: GPT-2's layout and "
             "names, so Hugging Face's GPT-2 weights load) or an llm.c model file "
             "(`gpt2_124M.bin`, fp32 or bf16). Only the weights are taken; the optimizer, step and "
             "data order start afresh. Every tensor must match the model's shape (and the "
             "number of heads, where the source says it), but `wpe` may have more rows than "
             "model.seq_len (its first rows are taken). Read once, at a run's first start: a run "
             "that resumes continues from its own checkpoint. Relative to the working directory; "
             "empty = none."),

      RM_KEY(data.format, one_of_its_choices(),
             "`text`: any file, one token per byte; `tokens`: llm.c .bin shards of uint16 token "
             "ids."),
      RM_KEY(data.train, noted("non-empty"),
             "Training files or globs, relative to the working directory; one string = a "
             "one-item list."),
      RM_KEY(data.val, any(),
             "Validation files or globs; empty = hold out data.val_fraction of the training "
             "data. A file that data.train also names is refused."),
      RM_KEY(data.val_fraction, between(0, 0.5),
             "Share of the training data held out for validation when data.val is empty."),
      RM_KEY(data.tokenizer, any(),
             "A GPT-2 byte-pair tokenizer: a directory holding `encoder.json` and `vocab.bpe` "
             "(OpenAI's names) or `vocab.json` and `merges.txt` (Hugging Face's). With "
             "data.format text, the files are encoded with it as a run starts (every rank "
             "encodes them and keeps the tokens in memory, 2 bytes each, which the memory "
             "estimate counts as up to 2 bytes per byte of text: `ringmaster tokenize` makes "
             "token shards once, mapped instead, for large data); "
             "with either format, `ringmaster sample` and `eval` read and print text through "
             "it. model.vocab_size must be at least its vocabulary (50257 for GPT-2's). "
             "Relative to the working directory; empty = one token per byte."),
      RM_KEY(data.choices, any(),
             "A multiple-choice file in llm.c's eval format (HellaSwag's hellaswag_val.bin, from "
             "llm.c's dev/data/hellaswag.py), scored at each evaluation (train.eval_every) as "
             "llm.c scores it: the accuracy, in metrics.jsonl as choice_accuracy, of picking "
             "the completion of the lowest mean loss per token, train.micro_batch "
             "completions a forward pass. gpt only; each example's context and completion must "
             "fit model.seq_len. Relative to the working directory; empty = none."),

      RM_KEY(train.steps, at_least(1), "Optimizer steps to train for."),
      RM_KEY(train.global_batch, at_least(1),
             "Sequences per optimizer step over all ranks = micro_batch × accumulation steps × "
             "data-parallel ranks."),
      RM_KEY(train.micro_batch, at_least(1), "Sequences per forward/backward pass on one rank."),
      RM_KEY(train.eval_every, at_least(0), "Steps between evaluations; 0 = never."),
      // At most 10^6: the evaluation's rounds are counted in int (2^31 wrapped to none, and a
      // NaN val_loss), and a million micro-batches is already hours per evaluation.
      RM_KEY(train.eval_batches, between(0, kMaxEvalBatches),
             "Validation micro-batches per evaluation: the first `eval_batches x micro_batch` "
             "windows of the validation data, whatever the rank count (so `val_loss` compares "
             "between runs of the same product). A run resumed with another `micro_batch` must "
             "keep the product; >= 1 when train.eval_every > 0."),
      RM_KEY(train.log_every, at_least(1), "Steps between metric log lines."),

      RM_KEY(optimizer.name, one_of_its_choices(), "Optimizer."),
      RM_KEY(optimizer.lr, above(0), "Peak learning rate, reached after the warmup."),
      RM_KEY(optimizer.min_lr, at_least(0),
             "Learning rate at the end of the decay; <= optimizer.lr."),
      RM_KEY(optimizer.warmup_steps, at_least(0), "Steps of linear warmup from 0 to optimizer.lr."),
      RM_KEY(optimizer.schedule, one_of_its_choices(),
             "After the warmup: `cosine` or `linear` decay from lr to min_lr over the steps "
             "left; `constant` lr; `wsd` (warmup-stable-decay, as MiniCPM's) lr until the last "
             "optimizer.decay_fraction of train.steps, then linear decay to min_lr. With wsd a "
             "run resumed with a larger train.steps before its decay began goes on exactly as "
             "a run of that length from the start (the others' decay stretches, so its "
             "learning rate jumps)."),
      RM_KEY(optimizer.decay_fraction, above_up_to(0, 1),
             "wsd: the share of train.steps, at the end, over which the learning rate decays "
             "to min_lr (at least 2 steps). Ignored by the other schedules."),
      RM_KEY(optimizer.beta1, between(0, 1, true), "AdamW first-moment decay."),
      RM_KEY(optimizer.beta2, between(0, 1, true), "AdamW second-moment decay."),
      RM_KEY(optimizer.eps, above(0), "AdamW denominator epsilon."),
      RM_KEY(optimizer.weight_decay, at_least(0),
             "Decoupled weight decay (matrices only, not biases or norms)."),
      RM_KEY(optimizer.grad_clip, at_least(0), "Clip the global gradient norm to this; 0 = off."),

      RM_KEY(parallel.backend, one_of_its_choices(),
             "Compute and communication backend; `auto` = cuda if a GPU is found, else cpu."),
      RM_KEY(parallel.shard, one_of_its_choices(),
             "ZeRO sharding: optimizer state (1), + gradients (2), + parameters (3)."),
      // Bounded: a bucket of 1e300 MiB overflowed the conversion to floats. 1 TiB is larger
      // than any model's gradients, which then make one bucket.
      RM_KEY(parallel.bucket_mb, above_up_to(0, 1048576),
             "Size of a gradient all-reduce bucket, MiB."),
      RM_KEY(parallel.overlap, any(), "Reduce gradient buckets while the backward pass runs."),
      // At most 1024, more than any node has cores: 10^6 asked OpenMP for a million threads.
      RM_KEY(parallel.threads_per_rank, between(0, 1024),
             "CPU threads per rank; 0 = cores / ranks on the node. The count changes the order "
             "of the BLAS sums, so results differ in the last bits between counts: a resume is "
             "bit for bit with the same."),
      // At most 10^6 s (11.6 days): far larger values overflowed the clocks' nanoseconds, and
      // every collective timed out at once. At least 1 s, as resilience.step_timeout_s: 1e-9 s
      // made every collective time out at once too, blaming a healthy peer.
      RM_KEY(parallel.timeout_s, between(1, 1e6),
             "Timeout of each collective, seconds; a stalled peer fails the job instead of "
             "hanging it. On several hosts a rank waiting for a rank of its own host gets half "
             "as long again (1-30 s more), so that the rank waiting on the network names the "
             "lost host first."),
      RM_KEY(parallel.precision, one_of_its_choices(),
             "Compute precision of matmuls and activations (master weights stay fp32)."),
      RM_KEY(parallel.grad_reduce, one_of_its_choices(),
             "Element type of the gradient reduction between ranks: bf16 halves the bytes sent, "
             "rounding each rank's gradients and the sum to bf16 (accumulated in fp32). It "
             "rounds on one rank too (a 1-rank run's weights then differ from fp32's by ~5e-5 "
             "after 20 steps)."),

      RM_KEY(checkpoint.every, at_least(0),
             "Steps between checkpoints; 0 = only at the end and on signals."),
      RM_KEY(checkpoint.keep, at_least(1), "Newest verified checkpoints to keep."),
      RM_KEY(checkpoint.keep_every, at_least(0),
             "Also keep, for good, every checkpoint whose step is a multiple of this, which must "
             "be a multiple of checkpoint.every (only saved steps can be kept); 0 = none."),
      RM_KEY(checkpoint.keep_best, any(),
             "Each evaluation (train.eval_every) that scores a lower validation loss than every "
             "one before it also saves a checkpoint of its step, and that checkpoint is kept "
             "beside the checkpoint.keep newest until a better one replaces it: "
             "RUN_DIR/checkpoints/best links to it, for `sample`, `eval`, `ckpt export` and "
             "model.init_from (what a run that overfits should be used from). Needs "
             "train.eval_every > 0."),
      RM_KEY(checkpoint.memory_every, at_least(0),
             "Steps between in-memory checkpoints: each rank copies its slice of the state "
             "(what its disk shard holds) into shared memory on its host (/dev/shm), verified, so "
             "that a restart after a process crash "
             "resumes from there when it is newer than the newest disk checkpoint (same ranks "
             "and shard mode); 0 = off."),
      RM_KEY(checkpoint.async, any(),
             "Write checkpoints in the background while training goes on."),
      RM_KEY(checkpoint.on_error, one_of_its_choices(),
             "A save that fails with an I/O error (disk full, EIO) -- its partial files are "
             "removed either way. stop: save nothing more and exit 1 (restarts apply); "
             "continue: warn, keep training and try again at the next interval."),
      RM_KEY(checkpoint.on_signal, any(),
             "On SIGTERM, SIGUSR1, SIGINT or SIGHUP (Slurm preemption, time limit, Ctrl-C, the "
             "terminal closing): finish the step, "
             "checkpoint it and exit with 75; false: the signal kills the run."),

      RM_KEY(resilience.max_restarts, at_least(0),
             "Times `ringmaster run` restarts a failed job from its newest verified checkpoint "
             "(as torchrun --max-restarts); 0 = never."),
      RM_KEY(resilience.shrink, any(),
             "When a restart of `ringmaster run --hosts` finds hosts unreachable and the hosts "
             "left lack the slots for every rank: go on with the ranks they hold (the batch "
             "arithmetic must still hold; else it says why and waits for the hosts), restoring "
             "from the in-memory checkpoints they keep when newer than the disk's. false: wait "
             "for the hosts. Spare slots are used either way."),
      RM_KEY(
          resilience.step_timeout_s, between(0, 1e6),
          "Seconds a rank may go without progress (a phase of a step, a checkpoint chunk read or "
          "written, a collective advancing) before a watchdog ends the job with exit code 1, "
          "naming the step, the phase and the collective it waits for; 0 = off, else >= 1. "
          "Keep it above the longest single phase (one layer's forward or backward, one fsync "
          "of a rank's checkpoint shard)."),
      RM_KEY(resilience.on_nan, one_of_its_choices(),
             "On a NaN/inf loss: skip the step, roll back to the last checkpoint, or abort."),
      RM_KEY(resilience.spike_loss_zscore, at_least(0),
             "Skip the update of a step whose loss is more than this many standard deviations "
             "above the mean of the losses of the 128 steps before it (after llm.c's -sl, "
             "which scores a value with itself in the window): a loss spike does not reach the "
             "weights. The step is logged with skipped: true and an event "
             "spike_skipped; the next step trains on the next batch. 0 = off; llm.c suggests 5."),
      RM_KEY(resilience.spike_norm_zscore, at_least(0),
             "The same for the gradient norm (after llm.c's -sg): skip the update of a step whose "
             "global gradient norm (before clipping) is more than this many standard deviations "
             "above the mean of the 128 steps' before it. 0 = off."),

      RM_KEY(
          observability.trace, any(),
          "Each rank records a Chrome trace of the step window below -- every phase, each "
          "layer's forward and backward, each gradient reduction from issue to completion, "
          "each checkpoint stage -- to RUN_DIR/trace/rank-NNNNN.json; `ringmaster trace RUN_DIR` "
          "merges them for Perfetto or chrome://tracing. Off: no cost."),
      RM_KEY(observability.trace_start, between(1, 1e15),  // start + steps must not overflow
             "The first traced step (1-based); the default skips the first steps' start-up "
             "effects (first touch of memory, the first checkpoint)."),
      RM_KEY(observability.trace_steps, between(1, 1000),
             "Steps traced from trace_start on: the trace's size is bounded by this window (and "
             "by 200000 events per rank)."),

      RM_KEY(cluster.nodes, at_least(1), "Slurm nodes (`--nodes`)."),
      RM_KEY(cluster.tasks_per_node, at_least(1), "Ranks per node (`--ntasks-per-node`)."),
      RM_KEY(cluster.gpus_per_node, at_least(0), "GPUs per node (`--gpus-per-node`); 0 = none."),
      RM_KEY(cluster.cpus_per_task, at_least(0),
             "CPU cores per rank (`--cpus-per-task`); 0 = Slurm's default."),
      RM_KEY(cluster.partition, checked(check_slurm_name, "Slurm name(s)"),
             "Slurm partition; empty = the cluster default."),
      RM_KEY(cluster.account, checked(check_slurm_name, "Slurm name(s)"),
             "Slurm account; empty = your default."),
      RM_KEY(cluster.qos, checked(check_slurm_name, "Slurm name(s)"),
             "Slurm QOS; empty = the default."),
      RM_KEY(cluster.time,
             checked(check_slurm_time, "`MIN`, `HH:MM:SS`, `D-HH:MM:SS`, `UNLIMITED`"),
             "Slurm time limit (`--time`); empty = the partition default."),
      RM_KEY(cluster.memory_per_node,
             checked(check_slurm_memory, "`64G`, `500000M`, `512000` (MB), `0`"),
             "Memory per node (`--mem`). `submit` refuses a job whose ranks on a node need more "
             "(as `run` does for this host); `0` asks Slurm for all of each node's memory, and "
             "empty asks nothing (the partition's default, which may be a small DefMemPerCPU): "
             "both are checked against the smallest node of its partition as `sinfo` reports "
             "it."),
      RM_KEY(cluster.signal_grace_s, between(0, 65535),
             "Seconds between Slurm's warning signal and the kill; the job checkpoints in "
             "between (sbatch --signal takes at most 65535)."),
      RM_KEY(cluster.sbatch_extra, any(),
             "Extra sbatch options, one per item (e.g. `--constraint=a100`)."),
      RM_KEY(cluster.env, noted("names: letters, digits, `_`"),
             "Environment variables set for every rank (by `run` and by `submit`'s batch "
             "script)."),
  };
}

#undef RM_KEY
#undef RM_KEY_DEFAULT

}  // namespace

const std::vector<KeySpec>& job_schema() {
  static const std::vector<KeySpec> schema = [] {
    std::vector<KeySpec> keys = build_schema();
    JobConfig probe;
    for (KeySpec& k : keys) {
      const FieldRef f = k.field(probe);
      if (const auto* choice = std::get_if<ChoiceRef>(&f)) k.allowed.choices = choice->words();
    }
    return keys;
  }();
  return schema;
}

const KeySpec* find_key(std::string_view path) {
  for (const KeySpec& k : job_schema()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

bool is_section(std::string_view path) {
  if (path.empty()) return true;
  for (const KeySpec& k : job_schema()) {
    if (k.path.size() > path.size() && k.path.substr(0, path.size()) == path &&
        k.path[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::vector<std::string> children(std::string_view path) {
  std::vector<std::string> out;
  if (!is_section(path)) return out;
  const size_t skip = path.empty() ? 0 : path.size() + 1;
  for (const KeySpec& k : job_schema()) {
    if (k.path.size() <= skip || k.path.substr(0, path.size()) != path) continue;
    if (skip > 0 && k.path[path.size()] != '.') continue;
    std::string_view rest = k.path.substr(skip);
    std::string name(rest.substr(0, rest.find('.')));
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::string range_text(const Constraint& c) {
  const bool has_min = std::isfinite(c.min), has_max = std::isfinite(c.max);
  if (has_min && has_max) {
    return std::string(c.min_open ? "(" : "[") + format_double(c.min) + ", " +
           format_double(c.max) + (c.max_open ? ")" : "]");
  }
  if (has_min) return (c.min_open ? "> " : ">= ") + format_double(c.min);
  if (has_max) return (c.max_open ? "< " : "<= ") + format_double(c.max);
  return "";
}

KeyType KeySpec::type() const {
  JobConfig probe;
  FieldRef f = field(probe);
  if (std::holds_alternative<double*>(f)) return KeyType::kFloat;
  if (std::holds_alternative<bool*>(f)) return KeyType::kBool;
  if (std::holds_alternative<std::string*>(f)) return KeyType::kString;
  if (std::holds_alternative<ChoiceRef>(f)) return KeyType::kEnum;
  if (std::holds_alternative<std::vector<std::string>*>(f)) return KeyType::kStringList;
  if (std::holds_alternative<std::map<std::string, std::string>*>(f)) return KeyType::kStringMap;
  return KeyType::kInt;
}

std::string_view KeySpec::type_name() const {
  JobConfig probe;
  FieldRef f = field(probe);
  if (std::holds_alternative<int64_t*>(f)) return "int64";
  if (std::holds_alternative<uint64_t*>(f)) return "uint64";
  switch (type()) {
    case KeyType::kInt:
      return "int";
    case KeyType::kFloat:
      return "float";
    case KeyType::kBool:
      return "bool";
    case KeyType::kString:
      return "string";
    case KeyType::kEnum:
      return "enum";
    case KeyType::kStringList:
      return "list of strings";
    case KeyType::kStringMap:
      return "map of strings";
  }
  return "?";
}

std::string KeySpec::default_text() const {
  if (!default_note.empty()) return std::string(default_note);
  JobConfig defaults;
  return yaml_text(field(defaults));
}

std::string KeySpec::allowed_text() const {
  std::string out;
  for (std::string_view c : allowed.choices) {
    out += (out.empty() ? "`" : ", `") + std::string(c) + "`";
  }
  if (out.empty()) out = range_text(allowed);
  if (!allowed.note.empty()) out += (out.empty() ? "" : "; ") + std::string(allowed.note);
  return out;
}

}  // namespace rm
