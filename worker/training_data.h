// Opens the train and validation datasets a job's `data` section names.
//
// data.train and data.val are lists of globs: text files (format: text), read as bytes or
// encoded with data.tokenizer, or llm.c token shards (format: tokens). Validation data is
// data.val when given, else the last val_fraction of every training file (none when
// val_fraction is 0).
// data.choices, a multiple-choice file, is read whole as the data opens.
// Errors (missing file, bad shard header, too little data, a token id outside the vocabulary
// when it is read, a bad multiple-choice file) throw rm::DataError naming the file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "configs/job_config.h"
#include "worker/data/bpe_tokenizer.h"
#include "worker/data/choice_file.h"
#include "worker/data/dataset.h"

namespace rm {

struct TrainingData {
  std::unique_ptr<WindowDataset> train;
  std::unique_ptr<WindowDataset> val;  // null when the job has no validation data
  // data.choices, read whole and checked against the model (check_choices_fit); empty when
  // none.
  std::vector<ChoiceExample> choices;
};

TrainingData open_training_data(const JobConfig& job);

// "" or, where an evaluation asks for more windows than the validation data holds
// (train.eval_batches x train.micro_batch), a line saying that val_loss counts some of them more
// than once (the windows are taken in turn, from the first again): a figure that looks like
// more data than there is.
std::string validation_repeats(const JobConfig& job, const TrainingData& data);

// What the ranks of a job must agree on about their data, as one line: each part's windows and
// its tokens' fingerprint (TokenSource::fingerprint), "train 8139 windows a1b2...; val 904
// windows 03f4..." -- the sample order is a function of the windows, so ranks that see other
// data (another copy on another host, a glob matching files still being written) would each
// draw from their own order, holding some samples twice and missing others, silently.
std::string data_identity(const TrainingData& data);

// The tokenizer in `dir` for a model of `model_vocab` tokens (0: no model, as for `tokenize`).
// Throws DataError "NAMED_BY: ..." (the key or flag that named it) for a tokenizer that does not
// load, or whose vocabulary is larger than the model's.
BpeTokenizer load_tokenizer_for(const std::string& dir, int model_vocab,
                                const std::string& named_by);
// The job's data.tokenizer for its model; none when the key is empty.
std::optional<BpeTokenizer> load_job_tokenizer(const JobConfig& job);

// Opens FILE (a token shard if it starts with llm.c's magic number, else text: encoded with
// `tokenizer` when given, else a byte a token) as an evaluation dataset of seq_len windows for
// a model with `vocab` tokens. bytes_model: the model was trained on text a byte a token
// (data.format text, no tokenizer); for any other, text without `tokenizer` -- or a damaged
// shard, its magic wrong -- is refused (DataError) instead of scored as bytes.
std::unique_ptr<WindowDataset> open_eval_file(const std::string& path, int seq_len, int vocab,
                                              BpeTokenizer* tokenizer = nullptr,
                                              bool bytes_model = true);

}  // namespace rm
