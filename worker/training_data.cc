#include "worker/training_data.h"

#include <cstdint>
#include <cstdio>

#include "io/posix_io.h"
#include "worker/data/data_error.h"
#include "worker/data/token_shard.h"

namespace rm {
namespace {

// Both formats: a list of globs, split into train and validation by fraction unless the job
// names validation files. Tokens outside the model's vocabulary fail when read, naming the file
// and position, instead of indexing past the embedding table.
TokenSource open_source(const JobConfig& job, const std::vector<std::string>& globs,
                        double begin, double end) {
  TokenSource s = job.data.format == DataFormat::kText
                      ? TokenSource::open_text_globs(globs, begin, end)
                      : TokenSource::open_shards(globs, begin, end);
  s.set_vocab_size(job.model.vocab_size);
  return s;
}

}  // namespace

TrainingData open_training_data(const JobConfig& job) {
  const DataConfig& d = job.data;
  const int T = job.model.seq_len;
  TrainingData out;
  if (!d.val.empty()) {
    out.train = std::make_unique<WindowDataset>(open_source(job, d.train, 0, 1), T, "train");
    out.val = std::make_unique<WindowDataset>(open_source(job, d.val, 0, 1), T, "val");
  } else {
    const double split = 1.0 - d.val_fraction;
    out.train = std::make_unique<WindowDataset>(open_source(job, d.train, 0, split), T, "train");
    if (d.val_fraction > 0) {
      out.val = std::make_unique<WindowDataset>(open_source(job, d.train, split, 1), T, "val");
    }
  }
  return out;
}

std::unique_ptr<WindowDataset> open_eval_file(const std::string& path, int seq_len, int vocab) {
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
  TokenSource s = magic == kTokenShardMagic ? TokenSource::open_shards({path})
                                            : TokenSource::open_text(path);
  s.set_vocab_size(vocab);
  return std::make_unique<WindowDataset>(std::move(s), seq_len, "eval");
}

}  // namespace rm
