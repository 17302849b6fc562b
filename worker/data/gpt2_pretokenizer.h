// GPT-2's pre-tokenizer: text cut into the pieces that byte-pair encoding then works on one at
// a time (bpe_tokenizer.h), as GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// cuts it: at each position, the first alternative that matches, taken as long as it goes.
// Written out by hand instead of through a regex engine: std::regex has no \p{..} classes,
// and a hand-written scan is linear in the text whatever it holds.
//
// Characters are classed by unicode_class.h (letters and numbers by Unicode's categories,
// `\s` as Unicode's White_Space). Bytes that are not valid UTF-8 are characters of their own,
// neither letter, number nor space (GPT-2's encoder only ever saw valid text, so there is no
// reference to follow; this keeps every byte in exactly one piece). The pieces cover the text
// exactly, in order.
#pragma once

#include <stddef.h>

#include <string_view>
#include <vector>

namespace rm {

struct TextPiece {
  size_t offset;  // in bytes
  size_t size;    // bytes, >= 1
};

// Appends text's pieces to `out` (cleared first).
void gpt2_pretokenize(std::string_view text, std::vector<TextPiece>& out);

// The size in bytes (>= 1) of the piece that starts at `pos` (< text.size()): the pieces one
// after another without a list of them all, which for a whole file would take 16 bytes a
// piece (bpe_tokenizer.h encodes files this way).
size_t gpt2_piece_at(std::string_view text, size_t pos);

}  // namespace rm
