#include "configs/yaml_format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace rm {
namespace {

// Words a YAML reader may take for something other than a string (YAML 1.1 booleans and
// nulls included, since the resolved job may be read by other tools).
bool is_special_word(std::string lower) {
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  static const char* const kWords[] = {"null", "~", "true", "false", "yes",   "no",  "on",
                                       "off",  "y", "n",    ".inf",  "-.inf", ".nan"};
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  return false;
}

bool looks_numeric(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end != s.c_str();  // a numeric prefix ("1e3", "0x1f", "12abc") is enough to quote
}

}  // namespace

std::string format_double(double v) {
  char buf[400];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  // %g chose an exponent. Write it the way YAML 1.1 readers (PyYAML) also take for a float,
  // with a '.' and a signed exponent, unpadded ("1e-08" -> "1.0e-8", "1e+20" -> "1.0e+20"),
  // but prefer the same digits in fixed notation when that is no longer ("300", not "3.0e+2").
  std::string mantissa = s.substr(0, e), exp = s.substr(e + 1);
  const int exp10 = std::atoi(exp.c_str());
  const bool negative = exp[0] == '-';
  if (exp[0] == '-' || exp[0] == '+') exp.erase(0, 1);
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  s = mantissa + "e" + (negative ? "-" : "+") + exp;
  std::snprintf(buf, sizeof buf, "%.*f", std::max(0, precision - 1 - exp10), v);
  return std::string(buf).size() <= s.size() ? std::string(buf) : s;
}

std::string yaml_quote(const std::string& s) {
  // Plain only for a conservative character set that cannot start a YAML indicator, contain
  // ": " / " #", or close a flow collection; ':' is excluded since "24:00:00" is a YAML 1.1 int.
  // '?' is excluded too: yaml-cpp 0.7 reads it inside a flow collection as a key indicator
  // ("[shard_??.bin]": "unknown token"), and lists and maps are written in flow style, so a
  // glob like data/shard_??.bin made the resolved job unreadable. Found by configs/job_fuzz.cc.
  bool plain =
      !s.empty() && !is_special_word(s) && !looks_numeric(s) &&
      (std::isalnum(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == '/' || s[0] == '.');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (!(std::isalnum(c) || std::string_view("_./+-=@*<>").find(ch) != std::string_view::npos)) {
      plain = false;
    }
  }
  if (plain) return s;
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const unsigned char c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      // NEL, LS and PS (U+0085, U+2028, U+2029) are line breaks to a YAML 1.1 reader (PyYAML
      // read them as a space): escaped. As \u, not \N \L \P: yaml-cpp 0.7 decodes \N to a lone
      // 0x85 byte.
      out += "\\u0085";
      ++i;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string yaml_text(const FieldRef& field) {
  struct Visitor {
    std::string operator()(int* v) const { return std::to_string(*v); }
    std::string operator()(int64_t* v) const { return std::to_string(*v); }
    std::string operator()(uint64_t* v) const { return std::to_string(*v); }
    std::string operator()(double* v) const { return format_double(*v); }
    std::string operator()(bool* v) const { return *v ? "true" : "false"; }
    std::string operator()(std::string* v) const { return yaml_quote(*v); }
    std::string operator()(const ChoiceRef& v) const { return yaml_quote(v.word()); }
    std::string operator()(std::vector<std::string>* v) const {
      std::string out;
      for (const std::string& s : *v) out += (out.empty() ? "" : ", ") + yaml_quote(s);
      return "[" + out + "]";
    }
    std::string operator()(std::map<std::string, std::string>* v) const {
      std::string out;
      for (const auto& [k, s] : *v) {
        out += (out.empty() ? "" : ", ") + yaml_quote(k) + ": " + yaml_quote(s);
      }
      return "{" + out + "}";
    }
  };
  return std::visit(Visitor{}, field);
}

}  // namespace rm
