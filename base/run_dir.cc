#include "base/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "base/run_lock.h"
#include "configs/job_diff.h"
#include "configs/job_loader.h"
#include "configs/lr_decay_start.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {

namespace fs = std::filesystem;

std::string run_file(const std::string& run_dir, const char* name) {
  return (fs::path(run_dir) / name).string();
}

JobConfig training_part(JobConfig j) {
  const TrainConfig defaults;
  const ModelConfig model_defaults;
  j.model.recompute = model_defaults.recompute;
  j.model.classifier_chunk_tokens = model_defaults.classifier_chunk_tokens;
  j.train.micro_batch = defaults.micro_batch;
  j.train.eval_batches = defaults.eval_batches;
  j.train.steps = defaults.steps;
  j.train.eval_every = defaults.eval_every;
  j.train.log_every = defaults.log_every;
  j.name.clear();
  j.run_dir.clear();
  j.parallel = ParallelConfig();
  j.checkpoint = CheckpointConfig();
  j.resilience = ResilienceConfig();
  j.observability = ObservabilityConfig();
  j.cluster = ClusterConfig();
  return j;
}

namespace {

// How the validation set (train.eval_batches x train.micro_batch windows) differs, with the
// eval_batches that would keep it; empty when it is the same, or when there is no set to keep.
std::string validation_change(const JobConfig& before_job, const JobConfig& now_job) {
  // No validation data (data.val empty and val_fraction 0, the same before and now: compared
  // with the rest of the job), or none evaluated before (eval_batches 0): no set to keep.
  if (!has_validation_data(now_job.data)) return "";
  const TrainConfig& before = before_job.train;
  const TrainConfig& now = now_job.train;
  const auto windows = [](const TrainConfig& t) {
    return static_cast<long long>(t.eval_batches) * t.micro_batch;
  };
  const long long was = windows(before), is = windows(now);
  if (was == is || was == 0) return "";
  const auto product = [](const TrainConfig& t, long long n) {
    return std::to_string(t.eval_batches) + " x " + std::to_string(t.micro_batch) + " = " +
           std::to_string(n);
  };
  const std::string out = "the validation set, train.eval_batches x train.micro_batch windows: " +
                          product(before, was) + " -> " + product(now, is);
  if (was % now.micro_batch != 0) {
    return out + " (no train.eval_batches keeps it with train.micro_batch " +
           std::to_string(now.micro_batch) + "; a micro_batch that divides " + std::to_string(was) +
           " would)";
  }
  if (was / now.micro_batch > kMaxEvalBatches) {
    return out + " (train.eval_batches would have to be " + std::to_string(was / now.micro_batch) +
           ", over its bound of " + std::to_string(kMaxEvalBatches) +
           "; a larger micro_batch that divides " + std::to_string(was) + " would keep it)";
  }
  const std::string keeps = "train.eval_batches " + std::to_string(was / now.micro_batch);
  if (now.micro_batch == before.micro_batch) return out + " (" + keeps + " keeps it)";
  return out + " (with train.micro_batch " + std::to_string(now.micro_batch) + ", " + keeps +
         " keeps it)";
}

// What a resumed run changes that it may (train.steps), for the run to say; empty when nothing.
std::string changed_length(const JobConfig& before, const JobConfig& now) {
  if (before.train.steps == now.train.steps) return "";
  const bool longer = now.train.steps > before.train.steps;
  const std::string to = std::to_string(now.train.steps);
  std::string line =
      "train.steps is " + to + ", where the run in this directory had " +
      std::to_string(before.train.steps) + ": it " +
      // The checkpoint the run resumes from: its newest, or the one --from names.
      (longer ? "goes on to step " + to + " from the checkpoint it resumes from"
              : "trains no step past " + to + " (from a checkpoint already past it, nothing more)");
  if (!longer) return line;
  switch (now.optimizer.schedule) {
    case LrScheduleKind::kConstant:
      return line;
    case LrScheduleKind::kWsd: {
      // Exact when every step the checkpoint holds was at lr in both schedules: the steps
      // through the old decay's first (printed 1-based, as checkpoints are named).
      const auto last_flat = [&](const JobConfig& j) {
        return std::to_string(decay_start(j.optimizer, j.train.steps) + 1);
      };
      return line + "; optimizer.schedule wsd: the learning rate stays at optimizer.lr through " +
             "step " + last_flat(now) + " (it did through step " + last_flat(before) +
             "), so from a checkpoint at or before step " + last_flat(before) +
             " the run goes on as if it had been this long from the start; from a later one, " +
             "already decaying, its rate goes back up to optimizer.lr";
    }
    default:
      return line + "; the learning-rate schedule now spans " + std::to_string(now.train.steps) +
             " steps, so its rate from here on is the " +
             "longer schedule's (optimizer.schedule wsd would have kept it)";
  }
}

// A write of one of the run's own files cut short (a rank killed as it wrote the final weights)
// leaves NAME.tmp.PID (io/atomic_file.h) for ever: for weights.bin, the model's size. Once this
// run owns the directory no process of an earlier one is left in it (own_run_dir waited for its
// ranks), so they go, said on the console. Only the names of our files: nothing of the user's.
void remove_cut_writes(const std::string& run_dir) {
  for (const std::string& name : io::list_dir(run_dir)) {
    for (const char* own : {"weights.bin", "config.yaml", "metrics.jsonl", "line.json"}) {
      const std::string prefix = std::string(own) + ".tmp.";
      if (name.size() <= prefix.size() || name.rfind(prefix, 0) != 0 ||
          name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
        continue;
      }
      io::remove_tree(run_file(run_dir, name.c_str()));
      std::printf("ringmaster: removed %s, a write of %s cut short\n", name.c_str(), own);
    }
  }
}

}  // namespace

void own_run_dir(const std::string& run_dir) {
  if (io::exists(run_dir) && !io::is_directory(run_dir)) {
    throw IoError(run_dir + ": run_dir is not a directory");
  }
  io::make_dirs_durable(run_dir);
  if (::access(run_dir.c_str(), W_OK | X_OK) != 0) {
    throw IoError(run_dir + ": run directory is not writable: " + std::strerror(errno));
  }
  lock_run_dir(run_dir, run_lock_wait_s());
}

RunStart prepare_run_dir(const std::string& run_dir, bool fresh, const std::string& resolved_job,
                         std::string* changes, const RecordedJob& recorded) {
  if (changes != nullptr) changes->clear();
  // Nothing is removed or written before this run owns the directory.
  own_run_dir(run_dir);
  remove_cut_writes(run_dir);
  const fs::path checkpoints = fs::path(run_dir) / "checkpoints";
  const std::string metrics = run_file(run_dir, "metrics.jsonl");
  const std::string weights = run_file(run_dir, "weights.bin");
  if (fresh) {
    // Through io/ and durable (remove_tree fsyncs the run directory): a power cut after
    // --fresh must not bring an old run's checkpoints back under the new one. Checkpoints
    // first; then what describes the old run (its events, traces, logs and the files `trace`
    // and `report` made of them), which `status`, `report` and `trace` would otherwise show
    // as the new run's.
    // A restart by `ringmaster run`'s supervisor (RM_RESTART_COUNT > 0, launcher/supervisor.h),
    // which starts a run that saved no checkpoint over with --fresh, keeps the events and logs:
    // they tell why the attempt before failed, and the restart's own event is among them.
    const char* restart = std::getenv("RM_RESTART_COUNT");
    const bool restarted = restart != nullptr && std::atoi(restart) > 0;
    for (const char* name : {"checkpoints", "metrics.jsonl", "weights.bin", "line.json",
                             "events.jsonl", "trace", "trace.json", "report.html", "logs"}) {
      const std::string_view n = name;
      if (restarted && (n == "events.jsonl" || n == "logs")) continue;
      io::remove_tree(run_file(run_dir, name));
    }
    return RunStart::kNew;
  }
  const bool has_checkpoints = fs::is_directory(checkpoints) && !fs::is_empty(checkpoints);
  const bool has_metrics = fs::exists(metrics), has_weights = fs::exists(weights);
  if (!has_checkpoints && !has_metrics && !has_weights) return RunStart::kNew;
  std::string previous = run_file(run_dir, "config.yaml");
  std::string previous_job;
  bool known = fs::exists(previous);
  if (known) {
    previous_job = io::read_file(previous);
  } else if (has_checkpoints && recorded) {
    // config.yaml removed (or only the checkpoints copied here): the checkpoints record the job.
    const std::pair<std::string, std::string> found = recorded(run_dir);
    known = !found.second.empty();
    previous = found.first;
    previous_job = found.second;
  }
  if (known) {
    // Each parsed once; one that does not parse is another job's.
    std::optional<JobConfig> before, now;
    try {
      before = load_stored_job(previous_job, "config.yaml");
      now = load_stored_job(resolved_job, "config.yaml");
    } catch (const std::exception&) {
    }
    std::string differs =
        before && now ? describe_differences(training_part(*before), training_part(*now)) : "";
    if (before && now) {
      const std::string validation = validation_change(*before, *now);
      if (!validation.empty()) differs += (differs.empty() ? "" : "; ") + validation;
    }
    if (!before || !now || !differs.empty()) {
      throw IoError(run_dir + ": holds a run of a different job (" + previous + " differs" +
                    (differs.empty() ? "" : ": " + differs) +
                    "); pass --fresh to start over, or set run_dir");
    }
    if (changes != nullptr) {
      *changes = changed_length(*before, *now);
      // Said only of a resume: a run restarted from its first step continues nothing.
      if (before->train.micro_batch != now->train.micro_batch && has_checkpoints) {
        *changes += std::string(changes->empty() ? "" : "; ") + "train.micro_batch is " +
                    std::to_string(now->train.micro_batch) + ", where the run in this directory " +
                    "had " + std::to_string(before->train.micro_batch) +
                    ": each step trains the same samples, their gradients summed in another "
                    "order (within floating-point tolerance of the run it continues, not bit "
                    "for bit)";
      }
    }
  }
  if (has_checkpoints) return RunStart::kResume;
  if (has_weights) {
    throw IoError(run_dir +
                  ": already holds a finished run (weights.bin); pass --fresh to "
                  "start it over, or set run_dir to a new directory");
  }
  if (!known) {
    throw IoError(run_dir +
                  ": holds a run (metrics.jsonl) but no config.yaml to tell which job; "
                  "pass --fresh to start over, or set run_dir");
  }
  return RunStart::kRestartUnfinished;
}

RunStart prepare_run(const JobConfig& job, bool fresh, std::string* changes,
                     const RecordedJob& recorded,
                     const std::function<void(RunStart)>& before_writing) {
  const std::string resolved = to_yaml(job);
  const RunStart start = prepare_run_dir(job.run_dir, fresh, resolved, changes, recorded);
  if (before_writing) before_writing(start);
  write_file_atomic(run_file(job.run_dir, "config.yaml"), resolved.data(), resolved.size());
  return start;
}

}  // namespace rm
