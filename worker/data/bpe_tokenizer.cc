#include "worker/data/bpe_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "io/io_error.h"
#include "io/posix_io.h"
#include "worker/data/data_error.h"
#include "worker/data/gpt2_pretokenizer.h"
#include "worker/data/unicode_class.h"

namespace rm {
namespace {

namespace fs = std::filesystem;

// Ids from this on are refused: the vocabulary is a table indexed by id (32 MiB of it at most).
// Training stores ids as uint16 anyway (at most 65536); this bound only keeps a hostile file
// from asking for gigabytes.
constexpr int64_t kMaxVocab = int64_t{1} << 20;
// Pieces remembered by encode; cleared when full (a corpus's distinct words are fewer).
constexpr size_t kMaxCachedPieces = size_t{1} << 18;
// A piece is merged with int indices (and ~20 bytes of bookkeeping a byte).
constexpr size_t kMaxPieceBytes = size_t{1} << 30;

// GPT-2's byte alphabet (encoder.py's bytes_to_unicode): the printable bytes stand for
// themselves, the other 68 for U+0100 onwards, in byte order.
struct ByteAlphabet {
  uint32_t char_of_byte[256];
  int16_t byte_of_char[324];  // -1 where the character stands for no byte
  ByteAlphabet() {
    std::fill(std::begin(byte_of_char), std::end(byte_of_char), int16_t{-1});
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char_of_byte[b] = printable ? b : next_extra++;
      byte_of_char[char_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// A token as written in the files -> its bytes; false if a character is outside the alphabet.
bool alphabet_to_bytes(std::string_view written, std::string& bytes) {
  bytes.clear();
  for (size_t pos = 0; pos < written.size();) {
    const DecodedChar c = decode_utf8_at(written, pos);
    if (c.code_point >= 324 || alphabet().byte_of_char[c.code_point] < 0) return false;
    bytes.push_back(static_cast<char>(alphabet().byte_of_char[c.code_point]));
    pos += static_cast<size_t>(c.bytes);
  }
  return true;
}

// GPT-2's vocabulary file is 1 MB, its merges 0.5 MB; the largest BPE tokenizers' are tens of MB.
// A larger file is refused before it is read into memory.
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;

std::string read_whole(const std::string& path) {
  try {
    io::Fd fd = io::open_read(path);
    const uint64_t size = io::regular_file_size(fd.get(), path);
    if (size > kMaxTokenizerFileBytes) {
      throw DataError(path, std::to_string(size >> 20) + " MiB, larger than the " +
                                std::to_string(kMaxTokenizerFileBytes >> 20) +
                                " MiB a tokenizer file may have (GPT-2's are 1 MB)");
    }
    std::string text(size, '\0');
    io::pread_exact(fd.get(), text.data(), text.size(), 0, path);
    return text;
  } catch (const IoError& e) {
    throw DataError(e.what());
  }
}

std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  return out + (s.size() > 40 ? "...'" : "'");
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeTokenizer BpeTokenizer::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError(dir,
                    std::string(fs::exists(dir, ec) ? "not a directory" : "no such directory") +
                        " (a GPT-2 tokenizer is a directory holding "
                        "encoder.json and vocab.bpe, or vocab.json and merges.txt)");
  }
  const auto has = [&](const char* name) { return fs::is_regular_file(fs::path(dir) / name, ec); };
  std::string vocab_name;
  std::string merges_name;
  if (has("encoder.json") && has("vocab.bpe")) {
    vocab_name = "encoder.json", merges_name = "vocab.bpe";
  } else if (has("vocab.json") && has("merges.txt")) {
    vocab_name = "vocab.json", merges_name = "merges.txt";
  } else {
    // Named, but not regular files (a directory, a pipe, a device): say which.
    for (const char* name : {"encoder.json", "vocab.bpe", "vocab.json", "merges.txt"}) {
      const fs::path p = fs::path(dir) / name;
      if (fs::exists(p, ec) && !has(name)) {
        throw DataError(p.string(), "not a regular file (a tokenizer file is read whole)");
      }
    }
    throw DataError(dir,
                    "no GPT-2 tokenizer here: expected encoder.json and vocab.bpe "
                    "(OpenAI's names) or vocab.json and merges.txt (Hugging Face's)");
  }
  const std::string vocab_path = (fs::path(dir) / vocab_name).string();
  const std::string merges_path = (fs::path(dir) / merges_name).string();
  BpeTokenizer t =
      from_strings(read_whole(vocab_path), read_whole(merges_path), vocab_path, merges_path);
  t.directory_ = dir;
  return t;
}

BpeTokenizer BpeTokenizer::from_strings(std::string_view vocab_json, std::string_view merges,
                                        const std::string& vocab_name,
                                        const std::string& merges_name) {
  BpeTokenizer t;
  // A key written twice: JSON parsers keep one of the two values and drop the other without a
  // word, which would leave a hole in the ids and a token encoded as another model's id.
  std::unordered_set<std::string> keys;
  std::string twice;
  const auto note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                             nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && twice.empty() &&
        !keys.insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  const nlohmann::json vocab = nlohmann::json::parse(vocab_json, note_keys, false);
  if (vocab.is_discarded() || !vocab.is_object() || vocab.empty()) {
    throw DataError(vocab_name, "not a JSON object of tokens and their ids");
  }
  if (!twice.empty()) throw DataError(vocab_name, "token " + shown(twice) + " is written twice");
  keys = {};  // the parse's copy of every token, no longer needed
  std::unordered_map<std::string, int32_t> id_of;
  id_of.reserve(vocab.size());
  std::string bytes;
  for (const auto& [written, value] : vocab.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= kMaxVocab) {
      throw DataError(vocab_name, "token " + shown(written) + ": id must be an integer in [0, " +
                                      std::to_string(kMaxVocab) + ")");
    }
    const auto id = static_cast<int32_t>(value.get<int64_t>());
    if (written.empty() || !alphabet_to_bytes(written, bytes)) {
      throw DataError(vocab_name, "token " + shown(written) + " (id " + std::to_string(id) +
                                      ") is not written in GPT-2's byte alphabet");
    }
    if (static_cast<size_t>(id) >= t.token_bytes_.size()) t.token_bytes_.resize(id + 1);
    if (!t.token_bytes_[id].empty()) {
      throw DataError(vocab_name, "id " + std::to_string(id) + " is given to two tokens");
    }
    if (!id_of.emplace(bytes, id).second) {
      throw DataError(vocab_name, "token " + shown(written) + " is listed twice");
    }
    t.token_bytes_[id] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      throw DataError(vocab_name, "no token for the byte " + std::to_string(b) +
                                      " (a byte-level vocabulary has one for each of the 256)");
    }
    t.byte_token_[b] = it->second;
  }

  uint32_t rank = 0;
  size_t line_no = 0;
  std::string left;
  std::string right;
  for (size_t pos = 0; pos < merges.size();) {
    size_t end = merges.find('\n', pos);
    if (end == std::string_view::npos) end = merges.size();
    std::string_view line = merges.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::string where = merges_name + ":" + std::to_string(line_no);
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw DataError(where, "expected two tokens separated by one space, got " + shown(line));
    }
    if (!alphabet_to_bytes(line.substr(0, space), left) ||
        !alphabet_to_bytes(line.substr(space + 1), right)) {
      throw DataError(where, shown(line) + " is not written in GPT-2's byte alphabet");
    }
    const auto l = id_of.find(left);
    const auto r = id_of.find(right);
    const auto merged = id_of.find(left + right);
    if (l == id_of.end() || r == id_of.end() || merged == id_of.end()) {
      throw DataError(where, "merge " + shown(line) + ": " +
                                 (merged == id_of.end() && l != id_of.end() && r != id_of.end()
                                      ? "the merged token is not in " + vocab_name
                                      : "a token it merges is not in " + vocab_name));
    }
    const uint64_t value =
        (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(merged->second);
    if (!t.merges_.emplace(pair_key(l->second, r->second), value).second) {
      throw DataError(where, "merge " + shown(line) + " is listed twice");
    }
    ++rank;
  }
  return t;
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  static const std::string none;
  if (id < 0 || static_cast<size_t>(id) >= token_bytes_.size()) return none;
  return token_bytes_[id];
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    const std::string& bytes = token_bytes(id);
    if (bytes.empty()) {
      throw std::out_of_range("token id " + std::to_string(id) + " is not in the tokenizer's " +
                              "vocabulary (" + std::to_string(vocab_size()) + " ids)");
    }
    out += bytes;
  }
  return out;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<int32_t> out;
  encode_into(text, out);
  return out;
}

void BpeTokenizer::encode_into(std::string_view text, std::vector<int32_t>& out) {
  encode_each(text,
              [&](const int32_t* ids, size_t count) { out.insert(out.end(), ids, ids + count); });
}

void BpeTokenizer::encode_each(std::string_view text,
                               const std::function<void(const int32_t*, size_t)>& sink) {
  std::vector<int32_t> merged;
  for (size_t pos = 0; pos < text.size();) {
    const std::string_view piece = text.substr(pos, gpt2_piece_at(text, pos));
    pos += piece.size();
    if (piece.size() > kMaxPieceBytes) {
      throw DataError("the text has a run of " + std::to_string(piece.size()) +
                      " bytes without a break between words (letters, digits, punctuation or "
                      "whitespace alone), more than the " +
                      std::to_string(kMaxPieceBytes) + " the tokenizer merges at once");
    }
    if (piece.size() == 1) {  // nothing to merge
      sink(&byte_token_[static_cast<uint8_t>(piece[0])], 1);
      continue;
    }
    std::string key(piece);
    const auto hit = cache_.find(key);
    if (hit != cache_.end()) {
      sink(hit->second.data(), hit->second.size());
      continue;
    }
    merged.clear();
    merge_piece(piece, merged);
    sink(merged.data(), merged.size());
    if (cache_.size() >= kMaxCachedPieces) cache_.clear();
    cache_.emplace(std::move(key), merged);
  }
}

void BpeTokenizer::merge_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // The piece's tokens as a linked list over their first byte's index; a heap of the pairs
  // that have a merge, lowest rank first and leftmost among equals. An entry is stale once
  // either of its tokens has changed or left the list, and is skipped then.
  const auto n = static_cast<int>(piece.size());
  std::vector<int32_t> id(static_cast<size_t>(n));
  std::vector<int> next(static_cast<size_t>(n));
  std::vector<int> prev(static_cast<size_t>(n));
  std::vector<bool> alive(static_cast<size_t>(n), true);
  for (int i = 0; i < n; ++i) {
    id[i] = byte_token_[static_cast<uint8_t>(piece[static_cast<size_t>(i)])];
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  struct Candidate {
    uint32_t rank;
    int left;
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto offer = [&](int left) {
    const int right = next[left];
    if (right >= n) return;
    const auto m = merges_.find(pair_key(id[left], id[right]));
    if (m != merges_.end()) {
      heap.push({static_cast<uint32_t>(m->second >> 32), left, id[left], id[right]});
    }
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int right = next[c.left];
    if (!alive[c.left] || right >= n || id[c.left] != c.left_id || id[right] != c.right_id) {
      continue;
    }
    id[c.left] = static_cast<int32_t>(merges_.at(pair_key(c.left_id, c.right_id)) & 0xFFFFFFFFu);
    alive[right] = false;
    next[c.left] = next[right];
    if (next[right] < n) prev[next[right]] = c.left;
    if (prev[c.left] >= 0) offer(prev[c.left]);
    offer(c.left);
  }
  for (int i = 0; i < n; i = next[i]) out.push_back(id[i]);
}

}  // namespace rm
