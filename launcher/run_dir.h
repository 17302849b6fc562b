// The run directory: where a job's resolved config, metrics and weights live.
//
//   RUN_DIR/config.yaml     the resolved job (every key, defaults filled, overrides applied)
//   RUN_DIR/metrics.jsonl   one JSON object per optimizer step
//   RUN_DIR/weights.bin     the final weights (checkpoint/weights_file.h)
#pragma once

#include <string>


namespace rm {

std::string run_file(const std::string& run_dir, const char* name);

// Makes RUN_DIR ready: creates it and its parents and proves it writable.
//  - fresh: removes a previous run's checkpoints, metrics and weights (start over).
//  - otherwise, a directory with checkpoints is resumed, but only by the same job
//    (config.yaml equal to resolved_job); one that holds a finished run without checkpoints is
//    refused (IoError), so nothing is overwritten by accident.
// Returns true when the run will resume (checkpoints present). Writes nothing else.
bool prepare_run_dir(const std::string& run_dir, bool fresh, const std::string& resolved_job);

}  // namespace rm
