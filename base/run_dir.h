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
