#include "worker/training_data.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "io/posix_io.h"
#include "worker/data/data_error.h"
#include "worker/data/encoded_text.h"
#include "worker/data/file_glob.h"
#include "worker/data/token_shard.h"

namespace rm {

std::string validation_repeats(const JobConfig& job, const TrainingData& data) {
  if (!data.val || job.train.eval_every <= 0) return "";
  const uint64_t asked =
      static_cast<uint64_t>(job.train.eval_batches) * static_cast<uint64_t>(job.train.micro_batch);
  const uint64_t held = data.val->num_eval_windows();
  if (asked <= held) return "";
  return "the validation data holds " + std::to_string(held) + " windows of " +
         std::to_string(job.model.seq_len) + " tokens, and an evaluation takes " +
         std::to_string(asked) +
         " (train.eval_batches x train.micro_batch = " + std::to_string(job.train.eval_batches) +
         " x " + std::to_string(job.train.micro_batch) +
         "): val_loss counts some of them more than once; " +
         (held >= static_cast<uint64_t>(job.train.micro_batch)
              ? "train.eval_batches " + std::to_string(held / job.train.micro_batch) + ", or "
              : std::string()) +
         "more validation data counts each once at most";
}

std::string data_identity(const TrainingData& data) {
  const auto part = [](const char* name, const WindowDataset& d) {
    char line[96];
    std::snprintf(line, sizeof line, "%s %llu windows %016llx", name,
                  static_cast<unsigned long long>(d.num_windows()),
                  static_cast<unsigned long long>(d.fingerprint()));
    return std::string(line);
  };
  std::string out = part("train", *data.train);
  if (data.val) out += "; " + part("val", *data.val);
  return out;
}

BpeTokenizer load_tokenizer_for(const std::string& dir, int model_vocab,
                                const std::string& named_by) {
  std::optional<BpeTokenizer> t;
  try {
    t.emplace(BpeTokenizer::load(dir));
  } catch (const DataError& e) {
    throw DataError(named_by + ": " + e.what());
  }
  if (model_vocab > 0 && t->vocab_size() > model_vocab) {
    throw DataError(named_by + ": " + dir + " has a vocabulary of " +
                    std::to_string(t->vocab_size()) + " tokens, more than the model's " +
                    std::to_string(model_vocab) + " (model.vocab_size)");
  }
  return std::move(*t);
}

std::optional<BpeTokenizer> load_job_tokenizer(const JobConfig& job) {
  if (job.data.tokenizer.empty()) return std::nullopt;
  return load_tokenizer_for(job.data.tokenizer, job.model.vocab_size, "data.tokenizer");
}

namespace {

// Refuses a validation file that is also a training file (the same file, by device and inode,
// whatever the path): its loss would be measured on data the model trains on, an optimistic
// figure that nothing else would reveal. The natural slip: llm.c's data directories hold
// fineweb_train_*.bin beside fineweb_val_*.bin, and `train: DIR/*.bin` takes both.
// A pattern that matches nothing is left to the opening of the files, which names its key.
void check_validation_apart(const DataConfig& d) {
  const auto expand = [](const std::vector<std::string>& patterns) {
    try {
      return expand_globs(patterns);
    } catch (const DataError&) {
      return std::vector<std::string>();
    }
  };
  using FileId = std::pair<dev_t, ino_t>;
  // A file that cannot be stat'ed is left to its opening, which says why.
  const auto id_of = [](const std::string& path) -> std::optional<FileId> {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return FileId{st.st_dev, st.st_ino};
  };
  std::map<FileId, std::pair<std::string, std::string>> training;  // path, pattern
  for (const std::string& pattern : d.train) {
    for (const std::string& path : expand({pattern})) {
      if (const auto id = id_of(path)) training.emplace(*id, std::make_pair(path, pattern));
    }
  }
  for (const std::string& path : expand(d.val)) {
    const auto id = id_of(path);
    const auto both = id ? training.find(*id) : training.end();
    if (both == training.end()) continue;
    const auto& [train_path, pattern] = both->second;
    throw DataError("data.val: " + path + " is also a training file (data.train's '" + pattern +
                    "' names it" + (train_path == path ? "" : " as " + train_path) +
                    "): the validation loss would be measured on data the model trains on; "
                    "name the training files so that they leave it out");
  }
}

}  // namespace

TrainingData open_training_data(const JobConfig& job) {
  const DataConfig& d = job.data;
  if (!d.val.empty()) check_validation_apart(d);
  const int T = job.model.seq_len;
  std::optional<BpeTokenizer> tokenizer = load_job_tokenizer(job);
  // Text with a tokenizer: each file encoded once, here; the train and validation sources that
  // split it share its tokens.
  const bool encoded = tokenizer && d.format == DataFormat::kText;
  // Errors name the key whose files they are about.
  const auto of_key = [](const char* key, auto open) {
    try {
      return open();
    } catch (const DataError& e) {
      throw DataError(std::string(key) + ": " + e.what());
    }
  };
  std::vector<EncodedText> encoded_train;
  std::vector<EncodedText> encoded_val;
  if (encoded) {
    encoded_train = of_key("data.train", [&] { return encode_text_globs(d.train, *tokenizer); });
    if (!d.val.empty()) {
      encoded_val = of_key("data.val", [&] { return encode_text_globs(d.val, *tokenizer); });
    }
  }
  // The tokens [begin, end) of each training (or validation) file. Tokens outside the model's
  // vocabulary fail when read, naming the file and position, instead of indexing past the
  // embedding table.
  const auto source = [&](const char* role, bool val_files, double begin, double end) {
    const std::vector<std::string>& globs = val_files ? d.val : d.train;
    return of_key(val_files ? "data.val" : "data.train", [&] {
      TokenSource s = encoded ? TokenSource::open_encoded(val_files ? encoded_val : encoded_train,
                                                          tokenizer->vocab_size(), begin, end)
                      : d.format == DataFormat::kText
                          ? TokenSource::open_text_globs(globs, begin, end)
                          : TokenSource::open_shards(globs, begin, end);
      s.set_vocab_size(job.model.vocab_size);
      return std::make_unique<WindowDataset>(std::move(s), T, role);
    });
  };
  TrainingData out;
  if (!d.val.empty()) {
    out.train = source("train", false, 0, 1);
    out.val = source("val", true, 0, 1);
  } else {
    const double split = 1.0 - d.val_fraction;
    out.train = source("train", false, 0, split);
    if (d.val_fraction > 0) out.val = source("val", false, split, 1);
  }
  if (!d.choices.empty()) {
    try {
      out.choices = read_choice_file(d.choices);
      check_choices_fit(d.choices, out.choices, job.model.vocab_size, T);
    } catch (const DataError& e) {
      throw DataError(std::string("data.choices: ") + e.what());
    }
  }
  return out;
}

std::unique_ptr<WindowDataset> open_eval_file(const std::string& path, int seq_len, int vocab,
                                              BpeTokenizer* tokenizer, bool bytes_model) {
  // A token shard starts with llm.c's magic number; anything else is text.
  // Read through io/: a FIFO or a device is refused at once instead of waited on.
  int32_t magic = 0;
  try {
    io::Fd fd = io::open_read(path);
    if (io::regular_file_size(fd.get(), path) >= sizeof magic) {
      io::pread_exact(fd.get(), &magic, sizeof magic, 0, path);
    }
  } catch (const IoError& e) {
    throw DataError(e.what());
  }
  // Text without a tokenizer is read as bytes, ids 0-255: the text of a model trained on bytes.
  // One trained on token ids (a shard's, a tokenizer's) would score a damaged shard (its magic
  // wrong) or text read as bytes as nonsense, and did.
  if (magic != kTokenShardMagic && tokenizer == nullptr && !bytes_model) {
    throw DataError(path, "not an llm.c token shard (its first 4 bytes are not the magic " +
                              std::to_string(kTokenShardMagic) +
                              "), and the model was trained "
                              "on token ids, not on text a byte a token: give a token shard, or "
                              "--tokenizer DIR to encode the text");
  }
  TokenSource s =
      magic == kTokenShardMagic ? TokenSource::open_shards({path})
      : tokenizer != nullptr
          ? TokenSource::open_encoded({encode_text_file(path, *tokenizer)}, tokenizer->vocab_size())
          : TokenSource::open_text(path);
  s.set_vocab_size(vocab);
  return std::make_unique<WindowDataset>(std::move(s), seq_len, "eval");
}

}  // namespace rm
