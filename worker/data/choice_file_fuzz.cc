// Fuzz target: reading a multiple-choice eval file in llm.c's format (choice_file.h).
//
// Input: a whole file (1 KiB header of int32 words, then the examples' uint16 words), written to
// the scratch directory as `name` and read with read_choice_file().
//
// Contract (fuzz/fuzz_target.h): accepted = the file reads; rejected = DataError whose message
// starts with the file's path. When it reads, encode_choice_file() of the examples must give the
// file's bytes back (its four header fields and every example word; the reserved header words
// aside), and check_choices_fit() must accept the examples at the vocabulary of their largest
// token + 1 and their longest window, and refuse them one below either. Anything else is a
// finding: another exception, a disagreement (std::logic_error), a crash, a sanitizer report, a
// hang.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/choice_file/ through it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_dir.h"
#include "worker/data/choice_file.h"
#include "worker/data/data_error.h"

namespace rm {
namespace {

// DataError from `f`; a finding when it throws none.
template <typename F>
void expect_refused(const char* what, F&& f) {
  try {
    f();
  } catch (const DataError&) {
    return;
  }
  fuzz::require(false, std::string("check_choices_fit accepted ") + what);
}

void check_examples(const std::string& path, const std::vector<ChoiceExample>& examples,
                    std::string_view file) {
  const std::string again = encode_choice_file(examples);
  fuzz::require(again.size() == file.size() && std::memcmp(again.data(), file.data(), 16) == 0 &&
                    std::memcmp(again.data() + 1024, file.data() + 1024, file.size() - 1024) == 0,
                "the examples read encode to other bytes than the file's");
  int max_token = 0;
  size_t window = 0;
  for (const ChoiceExample& e : examples) {
    for (int t : e.context) max_token = std::max(max_token, t);
    for (const auto& c : e.completions) {
      for (int t : c) max_token = std::max(max_token, t);
      window = std::max(window, e.context.size() + c.size() - 1);
    }
  }
  const int vocab = max_token + 1, seq_len = static_cast<int>(window);
  check_choices_fit(path, examples, vocab, seq_len);
  expect_refused("a token equal to the vocabulary size",
                 [&] { check_choices_fit(path, examples, vocab - 1, seq_len); });
  expect_refused("a window longer than seq_len",
                 [&] { check_choices_fit(path, examples, vocab, seq_len - 1); });
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  const std::string path = fuzz::write_scratch_file(name, input);
  std::vector<ChoiceExample> examples;
  try {
    examples = read_choice_file(path);
  } catch (const DataError& e) {
    return fuzz::rejected(e.what(), path + ": ");
  }
  check_examples(path, examples, input);
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}
