// The cross-field rules of a job: what no single key's range can express.
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include "configs/cluster_checks.h"
#include "configs/job_checks.h"
#include "configs/job_loader.h"
#include "configs/schema.h"
#include "configs/slurm_time.h"
#include "configs/yaml_format.h"

namespace rm {
namespace {

ConfigError error(const JobConfig& cfg, const std::string& key, const std::string& message) {
  ConfigError e;
  e.file = cfg.source_path;
  e.key = key;
  e.message = message;
  return e;
}

}  // namespace

std::vector<ConfigError> check_batch_arithmetic(const JobConfig& cfg, int dp_ranks) {
  if (dp_ranks < 1) {
    throw std::invalid_argument("check_batch_arithmetic: dp_ranks must be >= 1, got " +
                                std::to_string(dp_ranks));
  }
  const TrainConfig& t = cfg.train;
  if (t.micro_batch < 1 || t.global_batch < 1) return {};  // range errors, reported elsewhere
  const long long per_pass = static_cast<long long>(t.micro_batch) * dp_ranks;
  if (t.global_batch % per_pass == 0) return {};
  // Name every number, and the nearest batch sizes that would work.
  const long long below = t.global_batch / per_pass * per_pass, above = below + per_pass;
  std::string msg =
      std::to_string(t.global_batch) + " is not a multiple of micro_batch (" +
      std::to_string(t.micro_batch) + ") × data-parallel ranks (" + std::to_string(dp_ranks) +
      ") = " + std::to_string(per_pass) + "; the nearest valid value" +
      (below > 0 ? "s are " + std::to_string(below) + " and " : " is ") + std::to_string(above);
  // A resume on another rank count must keep global_batch (the run's optimizer steps are of
  // it): the largest micro_batch that divides it among these ranks, where one does.
  if (t.global_batch % dp_ranks == 0) {
    long long micro = t.micro_batch;
    while (micro > 1 && t.global_batch % (micro * dp_ranks) != 0) --micro;
    msg += ", or train.micro_batch " + std::to_string(micro) + " keeps global_batch " +
           std::to_string(t.global_batch) + " (as a resume on another rank count must)";
  }
  return {error(cfg, "train.global_batch", msg)};
}

std::vector<ConfigError> check_job(const JobConfig& cfg, int dp_ranks) {
  return check_job_if(cfg, dp_ranks, [](std::string_view) { return true; });
}

std::vector<ConfigError> check_job_if(const JobConfig& cfg, int dp_ranks,
                                      const std::function<bool(std::string_view key)>& usable) {
  std::vector<ConfigError> out;
  // Runs `rule` if all `keys` are usable.
  auto when = [&](std::initializer_list<std::string_view> keys, auto rule) {
    for (std::string_view k : keys) {
      if (!usable(k)) return;
    }
    rule();
  };
  auto add = [&](const std::string& key, const std::string& msg) {
    out.push_back(error(cfg, key, msg));
  };
  when({"train.global_batch", "train.micro_batch"}, [&] {
    for (ConfigError& e : check_batch_arithmetic(cfg, dp_ranks)) out.push_back(std::move(e));
  });
  const ModelConfig& m = cfg.model;
  when({"model.type", "model.width", "model.heads"}, [&] {
    if (m.type == ModelType::kGpt && m.heads > 0 && m.width % m.heads != 0) {
      add("model.width", std::to_string(m.width) + " is not divisible by model.heads (" +
                             std::to_string(m.heads) + ")");
    }
  });
  when({"train.eval_every", "train.eval_batches"}, [&] {
    if (cfg.train.eval_every > 0 && cfg.train.eval_batches < 1) {
      add("train.eval_batches", "must be >= 1 when train.eval_every > 0 (it is " +
                                    std::to_string(cfg.train.eval_every) + "), got " +
                                    std::to_string(cfg.train.eval_batches));
    }
  });
  when({"checkpoint.keep_best", "train.eval_every"}, [&] {
    if (cfg.checkpoint.keep_best && cfg.train.eval_every == 0) {
      add("checkpoint.keep_best",
          "needs evaluations to tell the best checkpoint: set train.eval_every > 0");
    }
  });
  when(
      {"train.eval_every", "data.val", "data.val_fraction", "data.choices", "checkpoint.keep_best"},
      [&] {
        // Without validation data an evaluation has no loss to report (it went by silently).
        if (cfg.train.eval_every == 0 || !cfg.data.val.empty() || cfg.data.val_fraction > 0) {
          return;
        }
        const std::string none =
            "there is no validation data (data.val is empty and data.val_fraction is 0): hold "
            "out a share of the training data (data.val_fraction: 0.1) or give data.val";
        if (cfg.checkpoint.keep_best) {
          add("checkpoint.keep_best", "needs validation losses, but " + none);
        } else if (cfg.data.choices.empty()) {
          add("train.eval_every", "is " + std::to_string(cfg.train.eval_every) + ", but " + none +
                                      ", or set train.eval_every: 0");
        }
      });
  when({"data.choices", "model.type", "train.eval_every"}, [&] {
    if (cfg.data.choices.empty()) return;
    if (m.type != ModelType::kGpt) {
      add("data.choices",
          "scores each position's prediction, which the mlp does not make: "
          "multiple-choice evaluation needs model.type gpt");
    } else if (cfg.train.eval_every == 0) {
      add("data.choices", "is scored at each evaluation: set train.eval_every > 0");
    }
  });
  const OptimizerConfig& o = cfg.optimizer;
  when({"optimizer.lr", "optimizer.min_lr"}, [&] {
    if (o.min_lr > o.lr) {
      add("optimizer.min_lr",
          format_double(o.min_lr) + " is greater than optimizer.lr (" + format_double(o.lr) + ")");
    }
  });
  when({"data.train"}, [&] {
    if (cfg.data.train.empty())
      add("data.train", "no training data: give at least one file or glob");
  });
  when({"data.format", "model.vocab_size", "data.tokenizer"}, [&] {
    // With a tokenizer, the data's vocabulary is the tokenizer's: checked when it is read
    // (worker/training_data.h), as this layer reads no files.
    if (cfg.data.format == DataFormat::kText && cfg.data.tokenizer.empty() && m.vocab_size < 256) {
      add("model.vocab_size", "must be >= 256 for data.format text (a token is a byte), got " +
                                  std::to_string(m.vocab_size));
    }
    if (cfg.data.format == DataFormat::kTokens && m.vocab_size > 65536) {
      add("model.vocab_size",
          "must be <= 65536 for data.format tokens (token ids are uint16), got " +
              std::to_string(m.vocab_size));
    }
  });
  // The watchdog (worker/watchdog.h) fires after this long without a beat, and beats come per
  // phase: per parameter unit of forward/backward, per 256 KiB of checkpoint I/O, per collective
  // step. Under a second, ordinary hiccups of a healthy run -- a rank descheduled on a busy
  // node, one fsync, page-cache writeback stalling a write -- would kill it; a floor of 1 s
  // still lets tests make it fire quickly.
  when({"resilience.step_timeout_s"}, [&] {
    const double t = cfg.resilience.step_timeout_s;
    if (t > 0 && t < 1) {
      add("resilience.step_timeout_s",
          "must be 0 (off) or at least 1 second, got " + format_double(t) +
              ": the watchdog would fire on the ordinary hiccups of a healthy run");
    }
  });
  when({"checkpoint.keep_every", "checkpoint.every"}, [&] {
    // Only saved steps can be kept: with every 100, keep_every 250 kept 500, 1000, ... -- the
    // multiples of both --, not the 250, 750 it asks for, and said nothing.
    const int64_t every = cfg.checkpoint.every, keep_every = cfg.checkpoint.keep_every;
    if (every > 0 && keep_every > 0 && keep_every % every != 0) {
      const int64_t below = keep_every / every * every;
      add("checkpoint.keep_every",
          std::to_string(keep_every) + " is not a multiple of checkpoint.every (" +
              std::to_string(every) +
              "): only saved steps can be kept, so it would keep the "
              "multiples of both; the nearest that keep what it says are " +
              (below > 0 ? std::to_string(below) + " and " : "") + std::to_string(below + every));
    }
  });
  when({"resilience.on_nan", "checkpoint.every"}, [&] {
    if (cfg.resilience.on_nan == OnNan::kRollback && cfg.checkpoint.every == 0) {
      add("resilience.on_nan",
          "rollback needs checkpoints to roll back to: set checkpoint.every > 0");
    }
  });
  when({"observability.trace", "observability.trace_start", "train.steps"}, [&] {
    // The window would begin after the run's last step: no rank records anything, and the run
    // said nothing until `ringmaster trace` found no trace to merge.
    const ObservabilityConfig& ob = cfg.observability;
    if (ob.trace && ob.trace_start > cfg.train.steps) {
      add("observability.trace_start",
          std::to_string(ob.trace_start) + " is past train.steps (" +
              std::to_string(cfg.train.steps) +
              "): the trace window would record nothing; set trace_start to at most " +
              std::to_string(cfg.train.steps) + " (the default, 3, skips start-up effects)");
    }
  });
  const ClusterConfig& c = cfg.cluster;
  when({"parallel.backend", "cluster.gpus_per_node", "cluster.tasks_per_node"}, [&] {
    // auto takes the GPUs where a node has them (as `submit` plans it): each rank then needs its
    // own, as under cuda, or every rank fails at start after the wait in the queue.
    const Backend backend = cfg.parallel.backend;
    if ((backend == Backend::kCuda || backend == Backend::kAuto) && c.gpus_per_node > 0 &&
        c.tasks_per_node > c.gpus_per_node) {
      add("cluster.tasks_per_node",
          std::to_string(c.tasks_per_node) + " ranks per node but cluster.gpus_per_node is " +
              std::to_string(c.gpus_per_node) +
              "; each rank of the cuda backend needs its own GPU" +
              (backend == Backend::kAuto
                   ? " (parallel.backend auto takes the GPUs; set it to cpu to train on the CPUs)"
                   : ""));
    }
  });
  when({"cluster.time", "cluster.signal_grace_s"}, [&] {
    // Slurm's warning comes signal_grace_s before the time limit; the job checkpoints then.
    const int64_t limit = c.time.empty() ? 0 : slurm_time_seconds(c.time);
    if (limit <= 0) return;  // the partition's limit, or none
    if (c.signal_grace_s == 0) {
      add("cluster.signal_grace_s",
          "is 0 with cluster.time " + c.time +
              ": Slurm would send no warning before the limit, and the run would lose every step "
              "since its last checkpoint; give the seconds a checkpoint takes (default 120)");
    } else if (std::ceil(c.signal_grace_s) >= static_cast<double>(limit)) {
      // Compared as the batch script asks for it: --signal takes whole seconds, rounded up.
      add("cluster.signal_grace_s",
          format_double(c.signal_grace_s) + " s is not less than cluster.time " + c.time + " (" +
              std::to_string(limit) +
              " s): the warning would come as the job starts, and it would checkpoint and "
              "requeue without training, for ever");
    }
  });
  when({"cluster.sbatch_extra", "cluster.env"}, [&] { check_cluster(c, add); });
  return out;
}

}  // namespace rm
