#include "worker/data/unicode_class.h"

#include <algorithm>
#include <iterator>

namespace rm {
namespace {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

#include "worker/data/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], uint32_t cp) {
  // The first range whose last code point is >= cp.
  const CodePointRange* r = std::lower_bound(
      std::begin(ranges), std::end(ranges), cp,
      [](const CodePointRange& range, uint32_t value) { return range.last < value; });
  return r != std::end(ranges) && r->first <= cp;
}

bool is_white_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {  // the common case, without a search
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    return is_white_space(cp) ? CharClass::kSpace : CharClass::kOther;
  }
  if (is_white_space(cp)) return CharClass::kSpace;
  if (in_ranges(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::kNumber;
  return CharClass::kOther;
}

const char* unicode_tables_version() {
  return kUnicodeVersion;
}

DecodedChar decode_utf8_at(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  const DecodedChar stray{0x110000u + lead, 1};
  if (lead < 0x80) return {lead, 1};
  int length = 0;
  uint32_t cp = 0;
  uint32_t smallest = 0;  // below this the sequence is overlong
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1Fu, smallest = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0Fu, smallest = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07u, smallest = 0x10000;
  } else {
    return stray;  // a continuation byte, or a lead byte UTF-8 never uses
  }
  if (pos + static_cast<size_t>(length) > text.size()) return stray;
  for (int k = 1; k < length; ++k) {
    const uint8_t b = byte(pos + static_cast<size_t>(k));
    if ((b & 0xC0u) != 0x80u) return stray;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < smallest || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return stray;
  return {cp, length};
}

}  // namespace rm
