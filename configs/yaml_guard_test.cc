// The pre-scan and the node walk of yaml_guard.h: each limit exactly at and past its value,
// what the scan skips (quoted strings, comments, block scalars) and what it must not.
#include "configs/yaml_guard.h"

#include <gtest/gtest.h>

#include <string>

namespace rm {
namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// "LINE:COL: message" of the problem, or "" if the text passes.
std::string problem_of(const std::optional<TextProblem>& p) {
  if (!p) return "";
  return std::to_string(p->line) + ":" + std::to_string(p->col) + ": " + p->message;
}

std::string structure(const std::string& text) {
  return problem_of(check_yaml_structure(text));
}
std::string encoding(const std::string& text) {
  return problem_of(check_text_encoding(text));
}

TEST(YamlGuard, EncodingAcceptsUtf8TextAndRefusesTheRest) {
  EXPECT_EQ(encoding("name: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\r\n\tx: 1\n"), "");
  EXPECT_EQ(encoding("\xEF\xBB\xBFname: x\n"), "");  // a UTF-8 byte order mark
  EXPECT_EQ(encoding(std::string("a: 1\nb: \0\n", 10)),
            "2:4: not a text file: a NUL byte (a binary file, or UTF-16 text?)");
  EXPECT_EQ(encoding("a: \x01\n"), "1:4: not a text file: control character 0x01 (a binary file?)");
  EXPECT_EQ(encoding("a: \x7F"), "1:4: not a text file: control character 0x7F (a binary file?)");
  // Columns count characters, not bytes.
  EXPECT_EQ(encoding("\xC3\xA9\xC3\xA9\xFF"),
            "1:3: not UTF-8 text: invalid byte 0xFF (a job file is UTF-8)");
  for (const char* bad : {"\xC0\x80",          // overlong NUL
                          "\xE0\x80\xAF",      // overlong '/'
                          "\xED\xA0\x80",      // a UTF-16 surrogate
                          "\xF4\x90\x80\x80",  // past U+10FFFF
                          "\xE2\x82",          // cut short
                          "\x80"}) {           // a continuation byte alone
    EXPECT_NE(encoding(std::string("x") + bad).find("1:2: not UTF-8 text"), std::string::npos)
        << ::testing::PrintToString(std::string(bad));
  }
  EXPECT_EQ(encoding(std::string("\377\376a\0", 4)),
            "1:1: not UTF-8 text: a UTF-16 byte order mark (save the file as UTF-8)");
}

TEST(YamlGuard, DepthCountsBlockIndentationAndFlowBracketsTogether) {
  // The top-level map is level 1, so 63 brackets reach 64.
  EXPECT_EQ(structure("x: " + repeat("[", 63) + repeat("]", 63)), "");
  EXPECT_EQ(structure("x: " + repeat("[", 64)), "1:67: nested deeper than 64 levels");
  EXPECT_EQ(structure("x: " + repeat("{a: ", 64)), "1:256: nested deeper than 64 levels");
  std::string block;
  for (int i = 0; i < 64; ++i) block += std::string(i, ' ') + "a:\n";
  EXPECT_EQ(structure(block), "");
  EXPECT_EQ(structure(block + std::string(64, ' ') + "a:\n"),
            "65:65: nested deeper than 64 levels");
  EXPECT_EQ(structure("x:\n" + repeat("- ", 63) + "1\n"), "");
  EXPECT_EQ(structure("x:\n" + repeat("- ", 64) + "1\n"), "2:129: nested deeper than 64 levels");
  // Siblings and dedents do not add up.
  EXPECT_EQ(structure(repeat("a:\n  b:\n    c: [[1]]\nd: {e: {f: 1}}\n", 100)), "");
}

TEST(YamlGuard, BracketsInStringsCommentsAndBlockScalarsAreNotNesting) {
  const std::string many = repeat("[{", 100);
  EXPECT_EQ(structure("a: '" + many + "'\nb: \"" + many + "\\\" " + many + "\"\n"), "");
  EXPECT_EQ(structure("a: 1  # " + many + "\n# " + many + "\n"), "");
  EXPECT_EQ(structure("a: it's " + many + "\n"), "");  // a plain scalar: '[' inside is text
  EXPECT_EQ(structure("a: |\n  " + many + "\n   " + many + "\nb: 1\n"), "");
  EXPECT_EQ(structure("a: >-  # folded\n  " + many + "\nb: 1\n"), "");
  // A quoted string may span lines; what follows it is scanned again.
  EXPECT_EQ(structure("a: 'x\n" + many + "'\nb: " + repeat("[", 64)),
            "3:67: nested deeper than 64 levels");
}

TEST(YamlGuard, AliasesAreCountedOutsideStrings) {
  const std::string aliases = "a: &a 1\nb: [*a" + repeat(", *a", 255) + "]\n";
  EXPECT_EQ(structure(aliases), "");
  EXPECT_EQ(structure(aliases + "c: *a\n"),
            "3:4: more than 256 aliases (*name); a job file needs few or none");
  EXPECT_EQ(structure(aliases + "c: '*a' \"*a\" a*b  # *a\n"), "");
}

TEST(YamlGuard, SeparatorsAreCountedEverywhere) {
  // 2 in the first line ('{' ':'), then one per comma.
  const std::string flow = "x: {a" + repeat(",a", kMaxYamlSeparators - 2) + "}";
  EXPECT_EQ(structure(flow), "");
  EXPECT_EQ(structure(flow + "\ny: 1\n"),
            "2:2: more than 20000 YAML entries (keys, list items, commas, brackets, documents); a "
            "job file has a few hundred");
  // Quoting does not hide a separator: the count bounds what yaml-cpp may build, whatever the
  // lexical scan concluded.
  EXPECT_NE(structure("x: '" + repeat(",", kMaxYamlSeparators) + "'\n"), "");
  EXPECT_NE(structure(repeat("---\n", kMaxYamlSeparators + 1)), "");
  EXPECT_NE(structure(repeat("- a\n", kMaxYamlSeparators + 1)), "");
}

TEST(YamlGuard, JobTextChecksSizeThenEncodingThenStructure) {
  EXPECT_EQ(problem_of(check_job_text(std::string(kMaxJobBytes, ' '))), "");
  EXPECT_EQ(problem_of(check_job_text(std::string(kMaxJobBytes + 1, ' '))),
            "0:0: too large for a job file: 1048577 bytes, the limit is 1048576 (1 MiB)");
  EXPECT_EQ(problem_of(check_job_text("x: " + repeat("[", 70) + "\x01")),
            "1:74: not a text file: control character 0x01 (a binary file?)");
}

TEST(YamlGuard, NodeWalkStopsAtTheLimit) {
  const YAML::Node three = YAML::Load("[a, b, c]");  // the sequence and its 3 items
  EXPECT_FALSE(yaml_expands_beyond(three, 4));
  EXPECT_TRUE(yaml_expands_beyond(three, 3));
  const YAML::Node map = YAML::Load("{a: 1, b: [x]}");  // map, 2 keys, 1, sequence, x
  EXPECT_FALSE(yaml_expands_beyond(map, 6));
  EXPECT_TRUE(yaml_expands_beyond(map, 5));

  // Aliases share one node in yaml-cpp, the walk counts each use: 10 levels of 10 would be
  // 10^10 nodes; the walk stops after kMaxYamlNodes.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    bomb += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + prev +
            repeat(", " + prev, 9) + "]\n";
  }
  EXPECT_EQ(structure(bomb), "");  // 90 aliases: the pre-scan lets it through
  EXPECT_TRUE(yaml_expands_beyond(YAML::Load(bomb)));
}

}  // namespace
}  // namespace rm
