// Fuzz target: GPT-2's byte-pair encoding (bpe_tokenizer.h, over gpt2_pretokenizer.h and
// unicode_class.h): a merges file read against a fixed vocabulary, then text encoded with it.
//
// Input: the merges file (as vocab.bpe or merges.txt hold it), a NUL byte, then the text; no
// NUL = merges only. The vocabulary is the 256 bytes and a fixed set of longer tokens (English
// pieces, multi-byte UTF-8), so that merges the fuzzer writes can name real tokens (the seeds'
// merges, written in GPT-2's byte alphabet: "Ġ" the space, "Ċ" the newline).
//
// Contract (fuzz/fuzz_target.h): accepted = the merges load; rejected = DataError whose message
// starts with the input's name. When they load, the text must encode to ids inside the
// vocabulary, decode back to exactly its bytes (whatever they are: invalid UTF-8, NULs), and
// encode to the same ids a second time (from the tokenizer's cache of pieces). Anything else is
// a finding.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/bpe_tokenizer/ through it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "worker/data/bpe_tokenizer.h"
#include "worker/data/data_error.h"
#include "worker/data/tokenizer_files_test_util.h"

namespace rm {
namespace {

// The vocabulary: the bytes, then these merged tokens (English pieces, UTF-8's "é" and "中").
std::string vocabulary_json() {
  return tokenizer_files(
             {{" ", "t"},        {" t", "h"},      {" th", "e"},         {"h", "e"},
              {"i", "n"},        {"e", "r"},       {"a", "n"},           {"an", "d"},
              {" ", "and"},      {"o", "u"},       {"l", "l"},           {"'", "s"},
              {"\n", "\n"},      {" ", " "},       {"  ", "  "},         {"\xc3", "\xa9"},
              {" ", "\xc3\xa9"}, {"\xe4", "\xb8"}, {"\xe4\xb8", "\xad"}, {"1", "2"},
              {"12", "3"},       {" ", "12"}})
      .vocab_json;
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  static const std::string vocab = vocabulary_json();
  const size_t nul = input.find('\0');
  const std::string_view merges = input.substr(0, nul);
  const std::string_view text =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  std::vector<int32_t> ids;
  try {
    BpeTokenizer t = BpeTokenizer::from_strings(vocab, merges, "vocab.json", name);
    ids = t.encode(text);
    for (int32_t id : ids) {
      fuzz::require(id >= 0 && id < t.vocab_size(),
                    "id " + std::to_string(id) + " outside the vocabulary");
    }
    fuzz::require(t.decode(ids) == text, "decode(encode(text)) is not the text");
    fuzz::require(t.encode(text) == ids, "a second encoding (from the cache) differs");
  } catch (const DataError& e) {
    return fuzz::rejected(e.what(), name + ":");
  }
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}
