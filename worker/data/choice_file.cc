#include "worker/data/choice_file.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "worker/data/data_error.h"
#include "worker/data/mapped_file.h"
#include "worker/data/token_shard.h"  // kTokenShardMagic

namespace rm {
namespace {

constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * 4;
constexpr uint16_t kStartMarker = 65535;
constexpr size_t kExampleFields = 6;  // start, bytes, index, label, completions, context length

[[noreturn]] void fail_example(const std::string& path, size_t index, const std::string& what) {
  throw DataError(path, "example " + std::to_string(index) + ": " + what);
}

// The uint16 words of one example, read in order; each read is bounds-checked against the
// example's stated size, so a length field that overruns it is caught where it is read.
class ExampleReader {
 public:
  ExampleReader(const std::string& path, size_t index, const uint16_t* words, size_t count)
      : path_(path), index_(index), words_(words), count_(count) {}

  uint16_t next(const char* what) {
    if (at_ == count_) fail(std::string("ends inside its ") + what);
    return words_[at_++];
  }
  // `n` tokens, each below the start marker.
  std::vector<int> tokens(size_t n, const char* what) {
    if (n == 0) fail(std::string(what) + " is empty");
    if (n > count_ - at_) {
      fail(std::string(what) + " has " + std::to_string(n) + " tokens, more than the " +
           std::to_string(count_ - at_) + " words left in the example");
    }
    std::vector<int> out(words_ + at_, words_ + at_ + n);
    at_ += n;
    return out;
  }
  size_t left() const { return count_ - at_; }
  [[noreturn]] void fail(const std::string& what) const { fail_example(path_, index_, what); }

 private:
  const std::string& path_;
  size_t index_;
  const uint16_t* words_;
  size_t count_;
  size_t at_ = 0;
};

}  // namespace

std::vector<ChoiceExample> read_choice_file(const std::string& path) {
  const MappedFile file = MappedFile::open(path);
  const size_t size = file.size();
  if (size < kHeaderBytes) {
    throw DataError(path, std::to_string(size) +
                              " bytes, shorter than the 1024-byte header of a "
                              "multiple-choice file (llm.c's eval format)");
  }
  int32_t header[kHeaderInts];
  std::memcpy(header, file.data(), kHeaderBytes);
  if (header[0] != kChoiceFileMagic) {
    throw DataError(path, "magic " + std::to_string(header[0]) + ", not " +
                              std::to_string(kChoiceFileMagic) +
                              ": not a multiple-choice file (llm.c's eval format)" +
                              (header[0] == kTokenShardMagic ? "; a token shard, for --data" : ""));
  }
  if (header[1] != kChoiceFileVersion) {
    throw DataError(path, "version " + std::to_string(header[1]) + ", only version 1 is read");
  }
  if (header[2] < 1 || header[2] > 65535) {
    throw DataError(path,
                    "the header says " + std::to_string(header[2]) + " examples, not 1 to 65535");
  }
  const size_t expected = static_cast<size_t>(header[2]);
  const size_t longest = header[3] > 0 ? static_cast<size_t>(header[3]) : 0;
  if ((size - kHeaderBytes) % 2 != 0) {
    throw DataError(path, "an odd number of bytes after the header (examples are uint16 words)");
  }
  // The words after the header; a mapping is page-aligned, so they are 2-byte aligned.
  const auto* words = reinterpret_cast<const uint16_t*>(file.data() + kHeaderBytes);
  const size_t total = (size - kHeaderBytes) / 2;
  std::vector<ChoiceExample> examples;
  examples.reserve(std::min<size_t>(expected, total / kExampleFields + 1));
  size_t at = 0, seen_longest = 0;
  for (size_t i = 0; i < expected; ++i) {
    if (at == total) {
      throw DataError(path, "the header says " + std::to_string(expected) +
                                " examples, the file ends after " + std::to_string(i));
    }
    if (total - at < 2) fail_example(path, i, "cut short");
    if (words[at] != kStartMarker) {
      fail_example(path, i,
                   "starts with " + std::to_string(words[at]) + ", not the marker 65535 (at byte " +
                       std::to_string(kHeaderBytes + 2 * at) + ")");
    }
    const size_t bytes = words[at + 1];
    if (bytes % 2 != 0 || bytes < 2 * kExampleFields || bytes / 2 > total - at) {
      fail_example(path, i,
                   "says it is " + std::to_string(bytes) + " bytes" +
                       (bytes / 2 > total - at ? ", past the end of the file"
                                               : ", not an even number of at least 12"));
    }
    ExampleReader r(path, i, words + at, bytes / 2);
    r.next("start");
    r.next("size");
    const uint16_t index = r.next("index");
    if (index != i)
      r.fail("its index field is " + std::to_string(index) + ", not " + std::to_string(i));
    ChoiceExample e;
    e.label = r.next("label");
    const size_t count = r.next("number of completions");
    if (count < 2) r.fail(std::to_string(count) + " completions: a choice needs at least 2");
    if (static_cast<size_t>(e.label) >= count) {
      r.fail("label " + std::to_string(e.label) + " names no completion of its " +
             std::to_string(count));
    }
    e.context = r.tokens(r.next("context length"), "its context");
    for (size_t c = 0; c < count; ++c) {
      const std::string what = "completion " + std::to_string(c);
      e.completions.push_back(r.tokens(r.next(what.c_str()), what.c_str()));
    }
    if (r.left() != 0)
      r.fail(std::to_string(r.left() * 2) + " bytes left over after its last completion");
    const auto marker = [](const std::vector<int>& t) {
      return std::find(t.begin(), t.end(), kStartMarker) != t.end();
    };
    bool has_marker = marker(e.context);
    for (const auto& c : e.completions) has_marker = has_marker || marker(c);
    if (has_marker) r.fail("a token of 65535, which is the examples' start marker");
    seen_longest = std::max(seen_longest, bytes);
    at += bytes / 2;
    examples.push_back(std::move(e));
  }
  if (at != total) {
    throw DataError(path, std::to_string(2 * (total - at)) + " bytes after the last of the " +
                              std::to_string(expected) + " examples the header says");
  }
  if (longest != seen_longest) {
    throw DataError(path, "the header says the longest example is " + std::to_string(header[3]) +
                              " bytes, it is " + std::to_string(seen_longest));
  }
  return examples;
}

void check_choices_fit(const std::string& path, const std::vector<ChoiceExample>& examples,
                       int vocab_size, int seq_len) {
  for (size_t i = 0; i < examples.size(); ++i) {
    const ChoiceExample& e = examples[i];
    const auto fail = [&](const std::string& what) { fail_example(path, i, what); };
    const auto check_vocab = [&](const std::vector<int>& tokens, const std::string& what) {
      for (int t : tokens) {
        if (t >= vocab_size) {
          fail(what + " holds token " + std::to_string(t) + ", >= the model's vocab_size " +
               std::to_string(vocab_size));
        }
      }
    };
    check_vocab(e.context, "its context");
    for (size_t c = 0; c < e.completions.size(); ++c) {
      const std::string what = "completion " + std::to_string(c);
      check_vocab(e.completions[c], what);
      const size_t window = e.context.size() + e.completions[c].size() - 1;
      if (window > static_cast<size_t>(seq_len)) {
        fail("its context (" + std::to_string(e.context.size()) + " tokens) and " + what + " (" +
             std::to_string(e.completions[c].size()) + ") need a window of " +
             std::to_string(window) + " tokens, the model's seq_len is " + std::to_string(seq_len));
      }
    }
  }
}

std::string encode_choice_file(const std::vector<ChoiceExample>& examples) {
  if (examples.empty() || examples.size() > 65535) {
    throw std::invalid_argument("encode_choice_file: 1 to 65535 examples, not " +
                                std::to_string(examples.size()));
  }
  std::vector<uint16_t> stream;
  size_t longest = 0;
  const auto word = [](size_t v, const char* what) {
    if (v >= kStartMarker) {
      throw std::invalid_argument(std::string("encode_choice_file: ") + what + " " +
                                  std::to_string(v) + " does not fit below 65535");
    }
    return static_cast<uint16_t>(v);
  };
  for (size_t i = 0; i < examples.size(); ++i) {
    const ChoiceExample& e = examples[i];
    const size_t begin = stream.size();
    stream.insert(stream.end(), {kStartMarker, 0, static_cast<uint16_t>(i),
                                 word(static_cast<size_t>(e.label), "label"),
                                 word(e.completions.size(), "completion count")});
    const auto append = [&](const std::vector<int>& tokens) {  // <NUM><TOKENS>
      stream.push_back(word(tokens.size(), "length"));
      for (int t : tokens) stream.push_back(word(static_cast<size_t>(t), "token"));
    };
    append(e.context);
    for (const std::vector<int>& c : e.completions) append(c);
    const size_t bytes = 2 * (stream.size() - begin);
    stream[begin + 1] = word(bytes, "example size in bytes");
    longest = std::max(longest, bytes);
  }
  int32_t header[kHeaderInts] = {};
  header[0] = kChoiceFileMagic;
  header[1] = kChoiceFileVersion;
  header[2] = static_cast<int32_t>(examples.size());
  header[3] = static_cast<int32_t>(longest);
  std::string out(reinterpret_cast<const char*>(header), kHeaderBytes);
  out.append(reinterpret_cast<const char*>(stream.data()), 2 * stream.size());
  return out;
}

}  // namespace rm
