// Opens the train and validation datasets a job's `data` section names.
//
// data.train and data.val are lists of globs: text files read as bytes (format: text) or llm.c
// token shards (format: tokens). Validation data is data.val when given, else the last
// val_fraction of every training file (none when val_fraction is 0).
// Errors (missing file, bad shard header, too little data, a token id outside the vocabulary
// when it is read) throw rm::DataError naming the file.
#pragma once

#include <memory>

#include "configs/job_config.h"
#include "worker/data/dataset.h"

namespace rm {

struct TrainingData {
  std::unique_ptr<WindowDataset> train;
  std::unique_ptr<WindowDataset> val;  // null when the job has no validation data
};

TrainingData open_training_data(const JobConfig& job);

// Opens FILE (a token shard if it starts with llm.c's magic number, else text) as an
// evaluation dataset of seq_len windows for a model with `vocab` tokens.
std::unique_ptr<WindowDataset> open_eval_file(const std::string& path, int seq_len, int vocab);

}  // namespace rm
