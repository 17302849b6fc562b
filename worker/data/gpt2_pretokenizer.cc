#include "worker/data/gpt2_pretokenizer.h"

#include "worker/data/unicode_class.h"

namespace rm {
namespace {

// The contractions GPT-2's pattern lists first, without their apostrophe; case-sensitive, as
// the pattern is.
size_t contraction_at(std::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  const char a = text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char b = text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The end of the run of characters of class `cls` starting at pos.
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const DecodedChar c = decode_utf8_at(text, pos);
    if (char_class(c.code_point) != cls) break;
    pos += static_cast<size_t>(c.bytes);
  }
  return pos;
}

// The length of the piece starting at pos.
size_t piece_at(std::string_view text, size_t pos) {
  if (const size_t n = contraction_at(text, pos)) return n;
  const DecodedChar c = decode_utf8_at(text, pos);
  const CharClass cls = char_class(c.code_point);
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`, in that order: an optional U+0020 first.
  // A piece that starts with a space takes the class of the character after it.
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    const CharClass next = char_class(decode_utf8_at(text, pos + 1).code_point);
    if (next != CharClass::kSpace) return run_end(text, pos + 1, next) - pos;
  }
  if (cls != CharClass::kSpace) return run_end(text, pos, cls) - pos;
  // `\s+(?!\S)`: the whitespace run, less its last character when a non-space follows (which
  // then starts the next piece, " word" or "\tword" alike); `\s+` where that leaves nothing.
  size_t last = pos;  // start of the run's last character
  size_t end = pos;
  while (end < text.size()) {
    const DecodedChar w = decode_utf8_at(text, end);
    if (char_class(w.code_point) != CharClass::kSpace) break;
    last = end;
    end += static_cast<size_t>(w.bytes);
  }
  if (end == text.size() || last == pos) return end - pos;
  return last - pos;
}

}  // namespace

size_t gpt2_piece_at(std::string_view text, size_t pos) {
  return piece_at(text, pos);
}

void gpt2_pretokenize(std::string_view text, std::vector<TextPiece>& out) {
  out.clear();
  for (size_t pos = 0; pos < text.size();) {
    const size_t size = piece_at(text, pos);
    out.push_back({pos, size});
    pos += size;
  }
}

}  // namespace rm
