// A trained model loaded for use (sample, eval, ckpt export), from a run directory or from one
// of its checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "configs/job_config.h"
#include "model/model.h"

namespace rm {

struct LoadedRun {
  JobConfig job;
  std::unique_ptr<Model> model;
  std::vector<float> params;
  std::string source;  // the file or checkpoint directory the weights came from
  int64_t step = -1;   // the checkpoint's step; -1 for a run's final weights.bin
};

// `path` is either
//   - a checkpoint directory (it holds manifest.json): its job and parameters, every piece read
//     checked against its checksum; or
//   - a run directory: RUN_DIR/config.yaml with RUN_DIR/weights.bin when the run finished,
//     otherwise the newest checkpoint that verifies (a run still going, or killed).
// The model is planned for max_batch samples (0 = the job's micro_batch) and made by `make` once
// the job is read (null: make_model's defaults, a cpu Compute of its own, fp32). Throws IoError
// (no such directory, nothing to load), JobConfigError or CheckpointError naming the file.
using ModelMaker = std::function<std::unique_ptr<Model>(const JobConfig& job, int max_batch)>;
LoadedRun load_trained_model(const std::string& path, int max_batch,
                             const ModelMaker& make = nullptr);

}  // namespace rm
