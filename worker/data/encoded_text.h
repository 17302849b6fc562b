// Text files encoded with a GPT-2 tokenizer (bpe_tokenizer.h), held in memory as uint16 token
// ids: the tokens a TokenSource over text with data.tokenizer reads (token_source.h).
//
// Encoded once per process and shared by the sources that split a file (train and
// validation), so each file is read and encoded once. Costs (measured, one core): ~0.1 s per
// MB of English text, and 2 bytes a token (~0.6 bytes per byte of text) of memory for as long
// as a source holds it. Data of many gigabytes belongs in token shards (`ringmaster tokenize`),
// which are memory-mapped instead.
#pragma once

#include <stdint.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "configs/job_config.h"
#include "worker/data/bpe_tokenizer.h"

namespace rm {

struct EncodedText {
  std::string path;
  std::shared_ptr<const std::vector<uint16_t>> tokens;
};

// Each file named by `globs` (file_glob.h), encoded, in glob order. Throws DataError for a file
// that cannot be read, or a tokenizer with ids that do not fit in 16 bits.
std::vector<EncodedText> encode_text_globs(const std::vector<std::string>& globs,
                                           BpeTokenizer& tokenizer);

// One file, its path taken literally (no glob expansion).
EncodedText encode_text_file(const std::string& path, BpeTokenizer& tokenizer);

// One file's bytes encoded, as uint16 ids (the tokenizer's vocabulary must be <= 65536). The
// ids go straight into the result, reserved for a quarter of a token a byte (GPT-2's on English
// is ~0.3) and trimmed to size: ~1.6 bytes per byte of English text at the peak, 3 for a
// tokenizer of one token a byte, 2 bytes a token once done.
std::vector<uint16_t> encode_to_uint16(const std::string& path, std::string_view text,
                                       BpeTokenizer& tokenizer);

// The bytes of text the job's data encodes at start-up (data.format text with data.tokenizer:
// the files of data.train and data.val; 0 otherwise), for the memory estimate
// (planning/memory_estimate.h: data). Files that cannot be listed or read count 0: opening the
// data says what is wrong with them.
double tokenized_text_bytes(const DataConfig& data);

}  // namespace rm
