#include "worker/finished_run.h"

#include "base/run_dir.h"
#include "configs/job_loader.h"
#include "io/posix_io.h"
#include "observe/run_events.h"

namespace rm {
namespace {

// Whether the checkpoint is one a run wrote at its last step (the one weights.bin was written
// beside), by the job it was saved under. One whose job cannot be read counts as the end: the
// refusal this answers is for a case known, never a guess.
bool is_runs_end(const std::string& ckpt_dir) {
  try {
    const Manifest m = load_manifest(ckpt_dir);
    return m.step == load_stored_job(m.job, ckpt_dir + "/manifest.json").train.steps;
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace

FinishedRun judge_finished_run(const JobConfig& job, const std::optional<CheckpointInfo>& newest) {
  if (!io::exists(run_file(job.run_dir, "weights.bin"))) return FinishedRun::kGoesOn;
  // Refused, as a finished run without any checkpoint is (base/run_dir.h), instead of training
  // it again from step 0 beside its weights.bin.
  if (!newest) return FinishedRun::kNoCheckpointVerifies;
  if (newest->step >= job.train.steps) return FinishedRun::kGoesOn;
  // The end weights.bin holds, where the events say it: a checkpoint that was an end (an earlier
  // one, of a run extended since) is not that end. Only where it is not known, any end will do.
  const std::optional<int64_t> end = finished_runs_end(job.run_dir);
  const bool before_the_end = end ? newest->step < *end : !is_runs_end(newest->path);
  return before_the_end ? FinishedRun::kEndNewerThanCheckpoint : FinishedRun::kGoesOn;
}

std::optional<int64_t> finished_runs_end(const std::string& run_dir) {
  if (!io::exists(run_file(run_dir, "weights.bin"))) return std::nullopt;
  std::optional<int64_t> end;
  try {
    for_each_json_line_backwards(run_file(run_dir, "events.jsonl"), [&](const nlohmann::json& e) {
      if (e.value("event", "") != "finished") return true;
      // Rank 0's has the step; the Slurm batch script's own, after it, has none: read on.
      const auto step = e.find("step");
      if (step == e.end() || !step->is_number_integer()) return true;
      end = step->get<int64_t>();
      return false;
    });
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable: not known, and the caller then trusts the disk alone
  }
  return end;
}

bool memory_keeps_finished_end(const JobConfig& job, int64_t memory_step) {
  if (memory_step >= job.train.steps) return true;
  if (!io::exists(run_file(job.run_dir, "weights.bin"))) return true;
  const std::optional<int64_t> end = finished_runs_end(job.run_dir);
  return end && memory_step >= *end;
}

std::string finished_run_refusal(const std::string& run_dir, FinishedRun verdict,
                                 int64_t checkpoint_step) {
  if (verdict == FinishedRun::kNoCheckpointVerifies) {
    return run_dir +
           ": holds a finished run (weights.bin) none of whose checkpoints verifies (above, why); "
           "pass --fresh to start it over, or set run_dir to a new directory";
  }
  return run_dir +
         ": holds a finished run whose end (weights.bin) is newer than its newest checkpoint "
         "that verifies (step " +
         std::to_string(checkpoint_step) +
         "; above, why the newer ones were skipped): going on would remove weights.bin and train "
         "from that checkpoint to another end. Move weights.bin out of the directory to keep "
         "that end and go on from the checkpoint, or pass --fresh to start the run over";
}

}  // namespace rm
