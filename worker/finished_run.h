// A run directory that holds a finished run (its weights.bin) and is run again without --from
// (train.steps extended, a requeue after the end): whether it may go on from its newest
// checkpoint that verifies, or is refused because going on would remove weights.bin, the only
// copy of an end no checkpoint holds (that end's checkpoint damaged) or train from step 0 beside
// it (no checkpoint verifies).
//
// Judged with the same rules before anything of the run is written (by the launcher, `run` or
// `submit`, or by a worker's rank 0 preparing the directory where no launcher did:
// worker/job_preparation.h), so that a refusal leaves config.yaml and events.jsonl as they were,
// and again by rank 0 as it resumes from disk (worker/checkpointing.h), on what it then finds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_reader.h"
#include "configs/job_config.h"

namespace rm {

enum class FinishedRun {
  kGoesOn,                  // no weights.bin, or its end is the newest checkpoint that verifies
  kNoCheckpointVerifies,    // weights.bin, and none of the run's checkpoints verifies
  kEndNewerThanCheckpoint,  // weights.bin, and the newest that verifies is before the run's end
};

// newest: find_resume_checkpoint(job.run_dir)'s answer.
FinishedRun judge_finished_run(const JobConfig& job, const std::optional<CheckpointInfo>& newest);

// The step of the run's end that weights.bin holds: rank 0's last "finished" event
// (observe/run_events.h), written once weights.bin is committed. nullopt: no weights.bin, or no
// such event (its line lost in a crash), an end not known.
std::optional<int64_t> finished_runs_end(const std::string& run_dir);

// Whether a resume from in-memory checkpoints (worker/memory_checkpoints.h) at memory_step keeps
// the run's end: memory is never on disk, so judge_finished_run cannot see it, and a step before
// the end would remove weights.bin as the run goes on (an end whose disk save failed under
// checkpoint.on_error: continue while memory held an earlier step). True when there is no
// weights.bin, when the step is at or past job.train.steps (nothing is removed), or when it is at
// or past the run's known end; otherwise the resume goes to the disk, whose rules decide.
bool memory_keeps_finished_end(const JobConfig& job, int64_t memory_step);

// The refusal (an InputError's text, exit 2) for a verdict other than kGoesOn; checkpoint_step:
// the newest checkpoint that verifies (kEndNewerThanCheckpoint). Its "above" is the list of
// checkpoints passed over, which the caller prints first.
std::string finished_run_refusal(const std::string& run_dir, FinishedRun verdict,
                                 int64_t checkpoint_step);

}  // namespace rm
