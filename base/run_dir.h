// The run directory: where a job's resolved config, metrics and weights live.
//
//   RUN_DIR/config.yaml     the resolved job (every key, defaults filled, overrides applied)
//   RUN_DIR/metrics.jsonl   one JSON object per optimizer step
//   RUN_DIR/weights.bin     the final weights (checkpoint/weights_file.h)
//   RUN_DIR/checkpoints/    verified checkpoints (checkpoint/)
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "configs/job_config.h"

namespace rm {

std::string run_file(const std::string& run_dir, const char* name);

// What of a resolved job says what it trains: everything but how it runs (parallel, checkpoint,
// resilience, observability, cluster), which may change between a run and its resume (e.g. 4
// ranks in ZeRO-1 resumed on 2 ranks in ZeRO-3), where it lives (name, run_dir: a run directory
// that was moved or copied resumes from its new place), how long it trains (train.steps: a run
// extended, or cut short) and how often it evaluates and logs -- those set to defaults. Two
// jobs train the same thing when their training parts are equal.
//
// train.micro_batch may change too: a step's samples do not depend on it (worker/trainer.h), only
// the order its gradients are summed in. But the validation set is the first eval_batches x
// micro_batch windows, and validation losses over other windows do not compare (the best
// checkpoint of checkpoint.keep_best is chosen by them): that product is compared instead, where
// a run directory's job is (prepare_run_dir).
//
// So may how the model's memory is spent, which the memory check and the planner suggest when a
// job does not fit (planning/memory_fit.h): model.recompute computes the same activations again,
// bit for bit (model/gpt_model.h), and model.classifier_chunk_tokens changes only the order the
// classifier's gradient is summed in, as micro_batch does.
JobConfig training_part(JobConfig j);

// What a run directory holds when a run starts in it.
enum class RunStart {
  kNew,         // nothing of this job's training yet (or --fresh)
  kResume,      // checkpoints: the run resumes from the newest verified one
  kRestartUnfinished,  // an unfinished run of the same job that died before its first
                       // checkpoint (metrics.jsonl, no checkpoint, no weights.bin): it starts
                       // again from step 0, as a rerun, a restart or a Slurm requeue must
};

// Creates RUN_DIR and its parents, proves it writable, and takes its run lock (base/run_lock.h:
// refused, with IoError, while another run lives in it). Writes nothing else. Again in the same
// process: nothing more.
void own_run_dir(const std::string& run_dir);

// Makes RUN_DIR ready: own_run_dir(), removes the temporary files of writes of its own files cut
// short (weights.bin.tmp.PID, ...), then:
//  - fresh: removes a previous run's checkpoints, metrics and weights, and its events, logs,
//    traces and the files made of them (trace.json, report.html): start over.
//  - otherwise a directory that holds a run (checkpoints, metrics.jsonl or weights.bin) is
//    accepted only for the same job (config.yaml trains the same thing as resolved_job: it may
//    differ in how it runs -- ranks, sharding, checkpoints, cluster, train.micro_batch while
//    train.eval_batches x micro_batch, the validation set, stays -- and in train.steps, so that
//    a run can be extended), and one that holds a finished run without checkpoints (weights.bin)
//    is refused, so nothing is overwritten by accident. Refusals throw IoError naming the
//    directory and the way out.
//  - changes (may be null): one line for the run to print when train.steps or train.micro_batch
//    differs from the run the directory holds (what the run will do, and what becomes of its
//    learning-rate schedule or its bit-for-bit resume); empty otherwise.
//  - recorded (may be empty): where config.yaml is gone but checkpoints are there, the job
//    they record, compared instead (base/ reads no checkpoint: the caller's function returns
//    {its path, for messages; the job text}, or an empty text when none is readable).
// Writes nothing else.
using RecordedJob = std::function<std::pair<std::string, std::string>(const std::string& run_dir)>;
RunStart prepare_run_dir(const std::string& run_dir, bool fresh, const std::string& resolved_job,
                         std::string* changes = nullptr, const RecordedJob& recorded = {});

// prepare_run_dir() for the job, then writes the resolved job to RUN_DIR/config.yaml
// (atomically). before_writing (may be empty) is called with the decision first: what it throws
// leaves config.yaml as it was.
RunStart prepare_run(const JobConfig& job, bool fresh, std::string* changes = nullptr,
                     const RecordedJob& recorded = {},
                     const std::function<void(RunStart)>& before_writing = {});

}  // namespace rm
