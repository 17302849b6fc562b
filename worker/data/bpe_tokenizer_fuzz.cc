// Fuzz target: GPT-2's byte-pair encoding (bpe_tokenizer.h, over gpt2_pretokenizer.h and
// unicode_class.h): a merges file read against a fixed vocabulary, then text encoded with it.
//
// Input: the merges file (as vocab.bpe or merges.txt hold it), a NUL byte, then the text; no
// NUL = merges only. The vocabulary is the 256 bytes and a fixed set of longer tokens (English
// pieces, multi-byte UTF-8), so that merges the fuzzer writes can name real tokens.
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

namespace rm {
namespace {

// The vocabulary, as encoder.json writes it (GPT-2's byte alphabet: "Ġ" is the space, "Ċ"
// the newline; "Ã©" is é's two bytes, "ä¸Ń" 中's three).
std::string vocabulary_json() {
  std::string json = "{";
  int id = 0;
  const auto add = [&](const std::string& written) {
    std::string escaped;
    for (char c : written) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    json += (id == 0 ? "\"" : ", \"") + escaped + "\": " + std::to_string(id);
    ++id;
  };
  for (uint32_t b = 0, extra = 256; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = printable ? b : extra++;
    if (cp < 0x80) {
      add(std::string(1, static_cast<char>(cp)));
    } else {
      add(std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))});
    }
  }
  for (const char* token :
       {"Ġt", "Ġth", "Ġthe", "he",   "in", "er",  "an", "and", "Ġand", "ou",  "ll",
        "'s", "ĊĊ",  "ĠĠ",   "ĠĠĠĠ", "Ã©", "ĠÃ©", "ä¸", "ä¸Ń", "12",   "123", "Ġ12"}) {
    add(token);
  }
  return json + "}";
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
