// Multiple-choice evaluation files in llm.c's format (dev/data/data_common.py write_evalfile;
// HellaSwag's validation set as llm.c ships it, hellaswag_val.bin, is one): for each example a
// context, its possible completions and which one is right. `ringmaster eval --choices` scores
// a model on them (worker/evaluate.h).
//
// Format, all little-endian: a header of 256 int32 -- [0] = 20240522 (magic), [1] = 1
// (version), [2] = the number of examples, [3] = the longest example in bytes -- then each
// example as uint16s:
//   65535 (the example's start), its size in bytes (these three fields included), its index
//   (0, 1, 2, ... in order), the label (the right completion's index), the number of
//   completions, the context's length and tokens, then per completion its length and tokens;
// and nothing after the last example. Every field is checked as the file is read, so a bad file
// fails before anything is scored: a DataError "PATH: example I: what is wrong" (or "PATH: what"
// for the header). Contexts and completions are not empty; a token of 65535 is not one (the
// start marker). Whether the tokens fit a model (vocabulary, context length) is checked by
// check_choices_fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rm {

constexpr int32_t kChoiceFileMagic = 20240522;
constexpr int32_t kChoiceFileVersion = 1;

struct ChoiceExample {
  int label = 0;  // index into completions
  std::vector<int> context;
  std::vector<std::vector<int>> completions;  // at least two
};

// Reads and checks the whole file.
std::vector<ChoiceExample> read_choice_file(const std::string& path);

// Throws DataError "PATH: example I: ..." for the first example whose tokens are >= vocab_size
// or whose context and completion do not fit a window of seq_len tokens (the last completion
// token is only predicted, never read: context + completion - 1 <= seq_len).
void check_choices_fit(const std::string& path, const std::vector<ChoiceExample>& examples,
                       int vocab_size, int seq_len);

// The file's bytes for `examples` (as llm.c's write_evalfile makes them): for tests, and a
// corpus of files for the fuzzer. Throws std::invalid_argument for what the format cannot hold
// (more than 65535 examples, an example of 65536 bytes or more, a token of 65535 or more).
std::string encode_choice_file(const std::vector<ChoiceExample>& examples);

}  // namespace rm
