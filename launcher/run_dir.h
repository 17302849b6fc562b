// The run directory: where a job's resolved config, metrics and weights live.
//
//   RUN_DIR/config.yaml     the resolved job (every key, defaults filled, overrides applied)
//   RUN_DIR/metrics.jsonl   one JSON object per optimizer step
//   RUN_DIR/weights.bin     the final weights (checkpoint/weights_file.h)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "configs/job_config.h"
#include "worker/model.h"

namespace rm {

std::string run_file(const std::string& run_dir, const char* name);

// Makes RUN_DIR ready for a new run: creates it and its parents, proves it writable, and
// refuses (IoError) to reuse a directory that already holds a run unless `fresh`.
// Writes nothing else, so a job that fails validation later leaves no trace.
void prepare_run_dir(const std::string& run_dir, bool fresh);

// A finished run, loaded for sampling or evaluation.
struct LoadedRun {
  JobConfig job;
  std::unique_ptr<Model> model;
  std::vector<float> params;
};

// Reads RUN_DIR/config.yaml and RUN_DIR/weights.bin; plans the model for max_batch samples
// (0 = the job's micro_batch). Throws JobConfigError or IoError naming the file.
LoadedRun load_run(const std::string& run_dir, int max_batch);

}  // namespace rm
