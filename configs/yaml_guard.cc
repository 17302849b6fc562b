#include "configs/yaml_guard.h"

#include <yaml-cpp/eventhandler.h>

#include <cstdio>
#include <sstream>
#include <vector>

namespace rm {
namespace {

TextProblem problem(int line, int col, std::string message) {
  return TextProblem{line, col, std::move(message)};
}

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

// The length of the well-formed UTF-8 sequence that starts at text[i] (a non-ASCII byte), or 0:
// Unicode's table 3-7, so overlong forms, surrogates and code points past U+10FFFF are refused.
size_t utf8_length(std::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = at(0);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(k) < 0x80 || at(k) > 0xBF) return 0;
  }
  return n;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// A '-', '?' or ':' that is an indicator: followed by a blank or the end of the line.
bool is_indicator(std::string_view line, size_t pos) {
  const char c = line[pos];
  return (c == '-' || c == '?' || c == ':') && (pos + 1 == line.size() || is_blank(line[pos + 1]));
}

// One pass over the lines; see the header for what is counted and why.
class StructureScan {
 public:
  // Structure first, so that a deep line reports its depth rather than its length.
  std::optional<TextProblem> line(std::string_view text, int line_no) {
    if (auto p = structure(text, line_no)) return p;
    return count_separators(text, line_no);
  }

 private:
  std::optional<TextProblem> structure(std::string_view text, int line_no);
  std::optional<TextProblem> count_separators(std::string_view text, int line_no);
  std::optional<TextProblem> push_block(size_t col, int line_no);
  std::optional<TextProblem> separator(int line_no, size_t col);
  std::optional<TextProblem> scan_rest(std::string_view text, size_t pos, int line_no);
  int depth() const { return static_cast<int>(block_.size()) + flow_depth_; }

  std::vector<size_t> block_;  // the columns of the open block collections, increasing
  int flow_depth_ = 0;
  char quote_ = 0;          // '\'' or '"' while inside a quoted scalar (it may span lines)
  long block_scalar_ = -1;  // inside a | or > scalar: the indentation of the line that began it
  int separators_ = 0;
  int aliases_ = 0;
};

std::optional<TextProblem> StructureScan::separator(int line_no, size_t col) {
  if (++separators_ <= kMaxYamlSeparators) return std::nullopt;
  return problem(line_no, static_cast<int>(col) + 1,
                 "more than " + std::to_string(kMaxYamlSeparators) +
                     " YAML entries (keys, list items, commas, brackets, documents); a job file "
                     "has a few hundred");
}

std::optional<TextProblem> StructureScan::push_block(size_t col, int line_no) {
  if (!block_.empty() && block_.back() >= col) return std::nullopt;
  block_.push_back(col);
  if (depth() <= kMaxYamlDepth) return std::nullopt;
  return problem(line_no, static_cast<int>(col) + 1,
                 "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
}

// Every separator counts, wherever it is (the header says why).
std::optional<TextProblem> StructureScan::count_separators(std::string_view text, int line_no) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool document = i == 0 && text.substr(0, 3) == "---";
    if (c == ',' || c == '[' || c == '{' || c == ':' || document ||
        ((c == '-' || c == '?') && is_indicator(text, i))) {
      if (auto p = separator(line_no, i)) return p;
    }
  }
  return std::nullopt;
}

std::optional<TextProblem> StructureScan::structure(std::string_view text, int line_no) {
  size_t pos = 0;
  while (pos < text.size() && text[pos] == ' ') ++pos;
  if (block_scalar_ >= 0) {
    if (pos == text.size() || static_cast<long>(pos) > block_scalar_) return std::nullopt;
    block_scalar_ = -1;
  }
  if (quote_ == 0 && flow_depth_ == 0) {
    if (pos == text.size() || text[pos] == '#') return std::nullopt;  // blank or a comment
    while (!block_.empty() && block_.back() > pos) block_.pop_back();
    if (auto p = push_block(pos, line_no)) return p;
    // "- - x", "- key: v", "? key": each indicator opens a collection one level deeper.
    while (pos < text.size() && is_indicator(text, pos)) {
      for (++pos; pos < text.size() && is_blank(text[pos]);) ++pos;
      if (pos == text.size() || text[pos] == '#') return std::nullopt;
      if (auto p = push_block(pos, line_no)) return p;
    }
  }
  return scan_rest(text, pos, line_no);
}

std::optional<TextProblem> StructureScan::scan_rest(std::string_view text, size_t pos,
                                                    int line_no) {
  const size_t indent = text.find_first_not_of(' ');
  bool plain = false;  // inside a plain scalar outside any flow collection: "it's [1" is text
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (quote_ == '\'') {
      if (c == '\'') {
        if (pos + 1 < text.size() && text[pos + 1] == '\'') {
          ++pos;  // '' is an escaped quote
        } else {
          quote_ = 0;
        }
      }
      continue;
    }
    if (quote_ == '"') {
      if (c == '\\') {
        ++pos;
      } else if (c == '"') {
        quote_ = 0;
      }
      continue;
    }
    const char prev = pos == 0 ? ' ' : text[pos - 1];
    if (c == '#' && is_blank(prev)) return std::nullopt;  // a comment, to the line end
    if (plain) {
      plain = !(c == ':' && is_indicator(text, pos));  // "key: value": a new token follows
      continue;
    }
    // Where a new token may begin; inside a flow collection also right after [ { ,
    const bool token_start = is_blank(prev) || pos == indent ||
                             (flow_depth_ > 0 && (prev == '[' || prev == '{' || prev == ','));
    if (c == '[' || c == '{') {
      if (!token_start && flow_depth_ == 0) continue;
      ++flow_depth_;
      if (depth() > kMaxYamlDepth) {
        return problem(line_no, static_cast<int>(pos) + 1,
                       "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
      }
    } else if ((c == ']' || c == '}') && flow_depth_ > 0) {
      --flow_depth_;
    } else if (!token_start || is_blank(c)) {
      // the rest of an anchor, tag or alias name, or of a plain scalar inside a flow collection
    } else if (c == '\'' || c == '"') {
      quote_ = c;
    } else if (c == '*') {
      if (++aliases_ > kMaxYamlAliases) {
        return problem(line_no, static_cast<int>(pos) + 1,
                       "more than " + std::to_string(kMaxYamlAliases) +
                           " aliases (*name); a job file needs few or none");
      }
    } else if ((c == '|' || c == '>') && flow_depth_ == 0 &&
               text.find_first_not_of("+-0123456789 \t", pos + 1) >= text.find(" #", pos)) {
      // A block scalar header ("|", ">-", "|2 # note"): its lines are text, not structure.
      block_scalar_ = static_cast<long>(indent);
      return std::nullopt;
    } else if (flow_depth_ == 0 && !is_indicator(text, pos) &&
               std::string_view("&!,]}").find(c) == std::string_view::npos) {
      plain = true;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<TextProblem> check_text_encoding(std::string_view text) {
  if (text.substr(0, 2) == "\xFF\xFE" || text.substr(0, 2) == "\xFE\xFF") {
    return problem(1, 1, "not UTF-8 text: a UTF-16 byte order mark (save the file as UTF-8)");
  }
  int line = 1, col = 1;
  size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // a byte order mark
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line, col = 1, ++i;
      continue;
    }
    if (c == 0) {
      return problem(line, col, "not a text file: a NUL byte (a binary file, or UTF-16 text?)");
    }
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F) {
      return problem(line, col,
                     "not a text file: control character " + hex_byte(c) + " (a binary file?)");
    }
    size_t n = 1;
    if (c >= 0x80 && (n = utf8_length(text, i)) == 0) {
      return problem(line, col,
                     "not UTF-8 text: invalid byte " + hex_byte(c) + " (a job file is UTF-8)");
    }
    i += n, ++col;
  }
  return std::nullopt;
}

std::optional<TextProblem> check_yaml_structure(std::string_view text) {
  StructureScan scan;
  int line_no = 1;
  for (size_t begin = 0; begin <= text.size(); ++line_no) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (auto p = scan.line(line, line_no)) return p;
    begin = end + 1;
  }
  return std::nullopt;
}

std::string job_too_large(uint64_t bytes, const std::string& kind) {
  return "too large for a " + kind + ": " + std::to_string(bytes) + " bytes, the limit is " +
         std::to_string(kMaxJobBytes) + " (1 MiB)";
}

std::optional<TextProblem> check_job_text(std::string_view text) {
  if (text.size() > kMaxJobBytes) return problem(0, 0, job_too_large(text.size()));
  if (auto p = check_text_encoding(text)) return p;
  return check_yaml_structure(text);
}

namespace {

// Records where each document starts: a document that starts where the previous one did has
// consumed nothing, and yaml-cpp would hand out the same empty document forever.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark start;
};

}  // namespace

std::vector<YAML::Node> load_all_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  int previous = -1;
  while (parser.HandleNextDocument(starts)) {
    if (starts.start.pos == previous) {
      const size_t at = static_cast<size_t>(previous);
      throw YAML::ParserException(starts.start,
                                  at < text.size() ? "unexpected '" + std::string(1, text[at]) + "'"
                                                   : std::string("unexpected end of text"));
    }
    previous = starts.start.pos;
  }
  return YAML::LoadAll(text);  // now known to end
}

bool yaml_expands_beyond(const YAML::Node& root, size_t limit) {
  // Depth first, so the stack holds one path's pending siblings, not a whole level.
  std::vector<YAML::Node> todo{root};
  size_t seen = 1;
  const auto visit = [&](const YAML::Node& n) {
    todo.push_back(n);
    return ++seen > limit;
  };
  while (!todo.empty()) {
    const YAML::Node n = todo.back();
    todo.pop_back();
    if (n.IsSequence()) {
      for (const YAML::Node& item : n) {
        if (visit(item)) return true;
      }
    } else if (n.IsMap()) {
      for (const auto& kv : n) {
        if (visit(kv.first) || visit(kv.second)) return true;
      }
    }
  }
  return seen > limit;
}

}  // namespace rm
