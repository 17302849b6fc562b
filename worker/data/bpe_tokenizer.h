// GPT-2's byte-level byte-pair encoding: text to token ids and back, from the two files GPT-2
// was published with.
//
// Files (a directory holding either pair):
//   encoder.json + vocab.bpe   OpenAI's names (gpt-2's models/124M/)
//   vocab.json + merges.txt    Hugging Face's names for the same two files (openai-community/gpt2)
// The vocabulary maps each token, written in GPT-2's byte alphabet (each of the 256 byte
// values drawn as one printable character: "Ġ" is the space), to its id; the merges list
// pairs of tokens, lowest rank first, after an optional "#version" line.
//
// Encoding: the text is cut into pieces (gpt2_pretokenizer.h); each piece starts as its bytes'
// tokens, and the adjacent pair with the lowest merge rank (the leftmost of equals) is merged
// until no pair has a merge -- GPT-2's encoder.py and tiktoken, which agree on GPT-2's files.
// Text is encoded as ordinary text: "<|endoftext|>" inside it is 13 characters, not token
// 50256 (tiktoken's encode_ordinary). Any bytes encode, valid UTF-8 or not, and
// decode(encode(b)) == b for every byte string b.
//
// Cost: linear in the text apart from each distinct piece's merging (n log n in its bytes),
// which a cache of pieces already seen skips for the words that repeat.
// Thread safety: load and the accessors are const; encode is not (its cache): one per thread.
#pragma once

#include <stdint.h>

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rm {

class BpeTokenizer {
 public:
  // Reads the directory `dir`. Throws DataError naming the file (and the line, or the token)
  // for a directory without either pair of files, a file that does not parse, a vocabulary
  // that leaves out a byte or repeats an id, or a merge of tokens the vocabulary lacks.
  static BpeTokenizer load(const std::string& dir);

  // From the two files' contents; vocab_name and merges_name name them in messages.
  static BpeTokenizer from_strings(std::string_view vocab_json, std::string_view merges,
                                   const std::string& vocab_name, const std::string& merges_name);

  // Largest id + 1: 50257 for GPT-2.
  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }
  const std::string& directory() const { return directory_; }

  // Throws DataError for a piece of over 1 GiB (one word, one run of spaces).
  std::vector<int32_t> encode(std::string_view text);
  // Appends the tokens of `text` to `out`.
  void encode_into(std::string_view text, std::vector<int32_t>& out);
  // Passes the tokens of `text` to `sink`, a piece's at a time, in order (the same tokens as
  // encode_into): a whole file is encoded without its tokens as int32 or a list of its pieces
  // in memory (encoded_text.h stores them as uint16). The span is valid during the call only.
  void encode_each(std::string_view text,
                   const std::function<void(const int32_t* ids, size_t count)>& sink);

  // The bytes of the tokens. Throws std::out_of_range naming an id outside [0, vocab_size())
  // or one the vocabulary does not define.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes of one token; empty for an id the vocabulary leaves out.
  const std::string& token_bytes(int32_t id) const;

 private:
  BpeTokenizer() = default;
  void merge_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::string directory_;
  std::vector<std::string> token_bytes_;  // by id; empty where no token has that id
  int32_t byte_token_[256] = {};          // the token of each single byte
  // (left id << 32 | right id) -> (rank << 32 | merged id)
  std::unordered_map<uint64_t, uint64_t> merges_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace rm
