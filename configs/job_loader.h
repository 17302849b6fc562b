// Loading a job: YAML text -> defaults -> --set overrides -> validation -> JobConfig.
//
// Every problem is collected before anything is thrown, so a user fixes a job file in one round
// trip: load_job() throws one JobConfigError listing them all, each as
//   FILE:LINE:COL: key.path: message      (1-based; the position of the offending value or key)
//   FILE: key.path: message               (the key is not in the file: a default, or whole-file)
//   --set key.path: message               (a problem in, or caused by, an override)
// Unknown keys and misspelt enum values come with a did-you-mean.
//
// The schema (schema.h) defines the keys, types, defaults and ranges; the cross-field rules are
// listed at check_job() below. None of these functions touch the data files; whether the globs
// match anything is the worker's concern. All functions are thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "configs/config_error.h"
#include "configs/job_config.h"

namespace rm {

// dp_ranks for a job that runs on cluster.nodes x cluster.tasks_per_node ranks (`submit`).
inline constexpr int kRanksFromCluster = 0;

// Reads the job file at `path` as job_file.h says: only a regular file of at most 1 MiB, else
// one error ("cannot read job file: <why>", "too large for a job file: ..."). Then as
// load_job_from_string() with `path` as the display name; sets JobConfig::source_path = path.
JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides = {},
                   int dp_ranks = 1);

// Parses `yaml_text`; `display_name` is the file name errors print. The text must first pass
// yaml_guard.h (size, UTF-8 text, nesting, aliases, entries; after parsing, the nodes its
// aliases expand to): a text that fails gives that one error, none about its keys. Each override is
// "key.path=value", applied in order after the file:
//   value is YAML: model.width=512, data.train=[a.bin,b.bin], data.train=a.bin (one item),
//   model={width: 512, heads: 8} (a section as a flow map); for string keys the text is taken
//   verbatim (cluster.time=24:00:00, cluster.partition= sets "");
//   cluster.env.NAME=value sets one entry of a map.
// An override must be text as a job file must (UTF-8, no NUL or control characters but tab, CR
// and LF), since it ends up in the resolved job; else it gives that one error.
// Then fills run_dir = "runs/<name>" if it is empty, and validates; `dp_ranks` (>= 1) is the
// number of data-parallel ranks for the batch arithmetic, or kRanksFromCluster (cluster.nodes ×
// cluster.tasks_per_node; more than INT_MAX ranks is an error). Throws JobConfigError.
JobConfig load_job_from_string(const std::string& yaml_text, const std::string& display_name,
                               const std::vector<std::string>& overrides = {}, int dp_ranks = 1);

// A job a run stored (RUN_DIR/config.yaml, a checkpoint manifest's job), read to compare it or to
// build its model: as load_job_from_string() without the rules between keys (check_job_if). Those
// were checked when the run started; rules added since (evaluations need validation data, ...)
// must not make an older run's checkpoints unreadable, or its directory "another job's".
JobConfig load_stored_job(const std::string& yaml_text, const std::string& display_name);
// The same for a file (RUN_DIR/config.yaml), read as load_job() reads one.
JobConfig load_stored_job_file(const std::string& path);

// train.global_batch must be micro_batch x dp_ranks x a whole number of accumulation steps.
// Returns the errors (key "train.global_batch", file = cfg.source_path, no position); empty if
// fine. Throws std::invalid_argument if dp_ranks < 1.
std::vector<ConfigError> check_batch_arithmetic(const JobConfig& cfg, int dp_ranks);

// Every cross-field rule, check_batch_arithmetic() included:
//   gpt: model.width divisible by model.heads
//   train.eval_batches >= 1 when train.eval_every > 0
//   optimizer.min_lr <= optimizer.lr
//   data.train non-empty
//   data.format text: model.vocab_size >= 256 (a token is a byte);
//   data.format tokens: model.vocab_size <= 65536 (token ids are uint16)
//   parallel.backend cuda with cluster.gpus_per_node > 0: tasks_per_node <= gpus_per_node
//   cluster.sbatch_extra and cluster.env: configs/cluster_checks.h
//   resilience.step_timeout_s: 0 (off) or >= 1
//   resilience.on_nan rollback: checkpoint.every > 0
// Errors carry the key and message only (file = cfg.source_path); load_job() adds positions.
std::vector<ConfigError> check_job(const JobConfig& cfg, int dp_ranks);

// The resolved job as YAML: every schema key, in schema order, defaults filled in. Loading it
// gives back the same JobConfig (except source_path), so to_yaml(load(to_yaml(c))) == to_yaml(c).
std::string to_yaml(const JobConfig& cfg);

// The reference table of every key (key | type | default | allowed | meaning), generated from the
// schema; docs/job-reference.md holds a copy between its BEGIN/END GENERATED markers.
std::string job_reference_markdown();

}  // namespace rm
