#include "worker/data/gpt2_pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker/data/unicode_class.h"

namespace rm {
namespace {

std::vector<std::string> pieces(const std::string& text) {
  std::vector<TextPiece> out;
  gpt2_pretokenize(text, out);
  std::vector<std::string> words;
  size_t covered = 0;
  for (const TextPiece& p : out) {
    EXPECT_EQ(p.offset, covered) << "pieces must cover the text in order";
    EXPECT_GE(p.size, 1u);
    words.push_back(text.substr(p.offset, p.size));
    covered += p.size;
  }
  EXPECT_EQ(covered, text.size());
  return words;
}

using Words = std::vector<std::string>;

// Each expectation below is what GPT-2's pattern gives (checked against tiktoken's r50k/gpt2
// encoding when written; tests/gpt2_tokenizer_reference_test.cc checks whole texts).
TEST(Gpt2Pretokenizer, WordsTakeTheSpaceBeforeThem) {
  EXPECT_EQ(pieces("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(pieces("a  b"), (Words{"a", " ", " b"}));  // the last space goes with the word
  EXPECT_EQ(pieces("x   "), (Words{"x", "   "}));      // trailing whitespace stays whole
  EXPECT_EQ(pieces(" 42 is 6x7"), (Words{" 42", " is", " 6", "x", "7"}));
  EXPECT_EQ(pieces("hi!? ..."), (Words{"hi", "!?", " ..."}));
}

TEST(Gpt2Pretokenizer, Contractions) {
  EXPECT_EQ(pieces("it's we're I'll they've I'm you'd don't"),
            (Words{"it", "'s", " we", "'re", " I", "'ll", " they", "'ve", " I", "'m", " you", "'d",
                   " don", "'t"}));
  // Case-sensitive, as the pattern is: "'S" is punctuation then a letter.
  EXPECT_EQ(pieces("IT'S"), (Words{"IT", "'", "S"}));
  EXPECT_EQ(pieces("'sup 'x"), (Words{"'s", "up", " '", "x"}));
}

TEST(Gpt2Pretokenizer, WhitespaceOtherThanTheSpace) {
  // A newline is no optional space: it stays apart from the word after it.
  EXPECT_EQ(pieces("a\nb"), (Words{"a", "\n", "b"}));
  EXPECT_EQ(pieces("a\n\n b"), (Words{"a", "\n\n", " b"}));
  EXPECT_EQ(pieces("a\n\n\tb"), (Words{"a", "\n\n", "\t", "b"}));
  EXPECT_EQ(pieces("\t\t"), (Words{"\t\t"}));
  // U+00A0 and U+3000 are whitespace; U+200B (zero width space) is not White_Space.
  EXPECT_EQ(pieces("a\u00a0\u00a0b"), (Words{"a", "\u00a0", "\u00a0", "b"}));
  EXPECT_EQ(pieces("a\u3000b\u200bc"), (Words{"a", "\u3000", "b", "\u200b", "c"}));
}

TEST(Gpt2Pretokenizer, LettersAndNumbersBeyondAscii) {
  EXPECT_EQ(pieces("café über Ωmega 中文"), (Words{"café", " über", " Ωmega", " 中文"}));
  // A combining accent is a mark (Mn), not a letter: it breaks the word.
  EXPECT_EQ(pieces("e\u0301t"), (Words{"e", "\u0301", "t"}));
  // Arabic-Indic digits, superscripts and Roman numerals are numbers (Nd, No, Nl).
  EXPECT_EQ(pieces("x\u0663\u00b2\u2167 y"), (Words{"x", "\u0663\u00b2\u2167", " y"}));
  EXPECT_EQ(pieces("\U0001F600\U0001F600!"), (Words{"\U0001F600\U0001F600!"}));
}

TEST(Gpt2Pretokenizer, InvalidUtf8BytesArePunctuationOfTheirOwn) {
  EXPECT_EQ(pieces(std::string("ab\xff\xfe cd")), (Words{"ab", "\xff\xfe", " cd"}));
  // A truncated sequence at the end, and a lone continuation byte.
  EXPECT_EQ(pieces(std::string("a\xe4\xb8")), (Words{"a", "\xe4\xb8"}));
  EXPECT_EQ(pieces(std::string(" \x80x")), (Words{" \x80", "x"}));
  EXPECT_EQ(pieces(std::string("\0\0a", 3)), (Words{std::string("\0\0", 2), "a"}));
}

TEST(UnicodeClass, DecodesValidAndRefusesInvalidSequences) {
  EXPECT_EQ(decode_utf8_at("\u00e9", 0).code_point, 0xE9u);
  EXPECT_EQ(decode_utf8_at("\u00e9", 0).bytes, 2);
  EXPECT_EQ(decode_utf8_at("\U0001F600", 0).code_point, 0x1F600u);
  // Overlong "/" (C0 AF), a surrogate (ED A0 80), above U+10FFFF (F4 90 80 80).
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    const DecodedChar c = decode_utf8_at(bad, 0);
    EXPECT_EQ(c.bytes, 1) << bad;
    EXPECT_GE(c.code_point, 0x110000u);
    EXPECT_EQ(char_class(c.code_point), CharClass::kOther);
  }
  EXPECT_EQ(char_class(0x0085), CharClass::kSpace);  // NEL: White_Space, as Rust's \s
  EXPECT_EQ(char_class(0x1c), CharClass::kOther);    // Python's isspace() says otherwise
  EXPECT_EQ(char_class(0xAA), CharClass::kLetter);   // ª: Lo
  EXPECT_STREQ(unicode_tables_version(), "14.0.0");
}

}  // namespace
}  // namespace rm
