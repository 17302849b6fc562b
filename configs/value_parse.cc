#include "configs/value_parse.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "configs/suggest.h"
#include "configs/yaml_guard.h"

namespace rm {
namespace {

bool has_position(const YAML::Mark& m) {
  return !m.is_null() && m.line >= 0;
}

bool is_plain_scalar(const YAML::Node& n) {
  return n.IsScalar() && n.Tag() == "?";
}

// A scalar's explicit tag as written (!!binary, !!float, !mine), or "" for none: plain ("?"),
// quoted ("!") and !!str, which says what a string key reads anyway. Tags are not acted on (a
// !!binary value was taken as its base64 text), so one is refused, named.
std::string explicit_tag(const YAML::Node& n) {
  const std::string& tag = n.Tag();
  if (tag == "?" || tag == "!" || tag == "tag:yaml.org,2002:str") return "";
  const std::string core = "tag:yaml.org,2002:";
  return tag.rfind(core, 0) == 0 ? "!!" + tag.substr(core.size()) : tag;
}

// For string keys: false, with the error added, for a scalar of an explicit tag.
bool untagged(const std::string& key, const YAML::Node& value, const YAML::Mark& mark,
              ErrorSink& sink) {
  if (!value.IsScalar()) return true;
  const std::string tag = explicit_tag(value);
  if (tag.empty()) return true;
  sink.add(key, mark, "a value tagged " + tag + ": YAML tags are not read; write the value itself");
  return false;
}

// No std::regex here: libstdc++ matches recursively, one stack frame per character, and a
// 500000-digit value would overflow the stack.
bool all_digits(const std::string& text, size_t from) {
  if (from >= text.size()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// [+-]?[0-9]+, or [+]?[0-9]+ when !allow_minus.
bool is_integer_text(const std::string& text, bool allow_minus) {
  const bool sign = !text.empty() && (text[0] == '+' || (allow_minus && text[0] == '-'));
  return all_digits(text, sign ? 1 : 0);
}

bool is_identifier(const std::string& name) {
  const auto letter = [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  };
  if (name.empty() || !letter(name[0])) return false;
  for (const char c : name) {
    if (!letter(c) && !std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A string value this long is no path, name or Slurm word; refusing it up front also keeps the
// schema's check functions (some use std::regex) away from huge inputs.
constexpr size_t kMaxStringBytes = 4096;

// A string must also survive the resolved job that `run` writes and reads back: once yaml-cpp
// has decoded its escapes it must still be text a job file may hold (yaml_guard.h: UTF-8, no
// NUL or control characters but tab, CR and LF). yaml-cpp 0.7 decodes the escapes "\N" and "\_"
// to the lone bytes 0x85 and 0xA0, which are not UTF-8: cluster.env values holding "\N" were
// accepted and the run's resolved job then refused. Found by configs/job_fuzz.cc.
bool refused_string(const std::string& key, const std::string& text, const YAML::Mark& mark,
                    ErrorSink& sink) {
  if (text.size() > kMaxStringBytes) {
    sink.add(key, mark,
             "longer than " + std::to_string(kMaxStringBytes) + " bytes, got " + shown_text(text));
    return true;
  }
  if (const auto problem = check_text_encoding(text)) {
    std::string msg = problem->message + ", once its escapes are decoded";
    if (text.find('\x85') != std::string::npos || text.find('\xA0') != std::string::npos) {
      msg += " (yaml-cpp decodes \\N and \\_ to single bytes: write \\u0085 or \\u00A0)";
    }
    sink.add(key, mark, msg);
    return true;
  }
  return false;
}

enum class FloatText { kFinite, kNotANumber, kNotFinite, kOutOfRange };

FloatText classify_float(const std::string& text, double* out) {
  std::string lower;
  for (const char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == ".inf" || lower == "+.inf" || lower == "-.inf" || lower == ".nan") {
    return FloatText::kNotFinite;  // YAML's spellings, which strtod does not read
  }
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) {
    return FloatText::kNotANumber;
  }
  // strtod reads C's hexadecimal floats ("0x10" = 16, "0x1p-10"); YAML has none, and integer
  // keys refuse "0x40": so do real ones.
  if (text.find_first_of("xX") != std::string::npos) return FloatText::kNotANumber;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return FloatText::kNotANumber;
  if (std::isfinite(v)) {
    *out = v;
    return FloatText::kFinite;
  }
  return errno == ERANGE ? FloatText::kOutOfRange : FloatText::kNotFinite;
}

// "" if v is inside c's range, else "must be >= 1, got 0" / "must be in [0, 0.5], got 0.7".
std::string range_error(const Constraint& c, double v, const std::string& text) {
  const bool below = c.min_open ? !(v > c.min) : !(v >= c.min);
  const bool over = c.max_open ? !(v < c.max) : !(v <= c.max);
  if (!below && !over) return "";
  const bool two_sided = std::isfinite(c.min) && std::isfinite(c.max);
  return std::string("must be ") + (two_sided ? "in " : "") + range_text(c) + ", got " + text;
}

// Integers: the text, then the field type's limits, then the key's range.
template <typename T>
bool set_integer(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark, T* field,
                 ErrorSink& sink) {
  const std::string key(spec.path);
  if (!is_plain_scalar(value)) {
    sink.add(key, mark, "expected an integer, got " + describe_node(value));
    return false;
  }
  const std::string& text = value.Scalar();
  T parsed;
  bool ok;
  if constexpr (std::is_unsigned_v<T>) {
    unsigned long long u = 0;
    ok = parse_unsigned_text(text, &u) && u <= std::numeric_limits<T>::max();
    parsed = static_cast<T>(u);
    if (!ok && !text.empty() && text[0] == '-' && parse_integer_text(text, nullptr)) {
      sink.add(key, mark, "must be >= 0, got " + shown_text(text, '\0'));
      return false;
    }
  } else {
    long long s = 0;
    ok = parse_integer_text(text, &s) && s >= std::numeric_limits<T>::min() &&
         s <= std::numeric_limits<T>::max();
    parsed = static_cast<T>(s);
  }
  if (!ok) {
    // Digits that do not fit are a range error, anything else a type error.
    if (is_integer_text(text, true)) {
      const bool negative = text[0] == '-';
      const std::string limit = negative ? std::to_string(std::numeric_limits<T>::min())
                                         : std::to_string(std::numeric_limits<T>::max());
      sink.add(key, mark,
               std::string("must be ") + (negative ? ">= " : "<= ") + limit + ", got " +
                   shown_text(text, '\0'));
    } else {
      sink.add(key, mark, "expected an integer, got " + describe_node(value));
    }
    return false;
  }
  const std::string err =
      range_error(spec.allowed, static_cast<double>(parsed), shown_text(text, '\0'));
  if (!err.empty()) {
    sink.add(key, mark, err);
    return false;
  }
  *field = parsed;
  return true;
}

bool set_float(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark, double* field,
               ErrorSink& sink) {
  const std::string key(spec.path);
  double v = 0;
  switch (is_plain_scalar(value) ? classify_float(value.Scalar(), &v) : FloatText::kNotANumber) {
    case FloatText::kFinite:
      break;
    case FloatText::kNotANumber:
      sink.add(key, mark, "expected a number, got " + describe_node(value));
      return false;
    case FloatText::kNotFinite:
      sink.add(key, mark, "must be a finite number, got " + describe_node(value));
      return false;
    case FloatText::kOutOfRange:
      sink.add(key, mark,
               "must be a finite number, got " + describe_node(value) +
                   ", which is beyond the largest double (about 1.8e308)");
      return false;
  }
  const std::string err = range_error(spec.allowed, v, shown_text(value.Scalar(), '\0'));
  if (!err.empty()) {
    sink.add(key, mark, err);
    return false;
  }
  *field = v;
  return true;
}

bool set_bool(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark, bool* field,
              ErrorSink& sink) {
  if (is_plain_scalar(value) && (value.Scalar() == "true" || value.Scalar() == "false")) {
    *field = value.Scalar() == "true";
    return true;
  }
  sink.add(std::string(spec.path), mark, "expected true or false, got " + describe_node(value));
  return false;
}

// The text of a string-valued key (a choice's word too): a scalar, or "" for null; false, with
// the error added, for a map or list, or a string refused_string() refuses.
bool string_scalar(const std::string& key, const YAML::Node& value, const YAML::Mark& mark,
                   ErrorSink& sink, std::string* text) {
  if (value.IsDefined() && !value.IsNull() && !value.IsScalar()) {
    sink.add(key, mark, "expected a string, got " + describe_node(value));
    return false;
  }
  if (!untagged(key, value, mark, sink)) return false;
  *text = value.IsScalar() ? value.Scalar() : "";
  return !refused_string(key, *text, mark, sink);
}

bool set_string(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark,
                std::string* field, ErrorSink& sink) {
  const std::string key(spec.path);
  std::string text;
  if (!string_scalar(key, value, mark, sink, &text)) return false;
  const Constraint& c = spec.allowed;
  if (c.check) {
    const std::string err = c.check(text);
    if (!err.empty()) {
      sink.add(key, mark, err);
      return false;
    }
  }
  *field = text;
  return true;
}

// A choice-valued key: the word is parsed into its enum here, once (configs/job_choices.h).
bool set_choice(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark,
                const ChoiceRef& field, ErrorSink& sink) {
  const std::string key(spec.path);
  std::string text;
  if (!string_scalar(key, value, mark, sink, &text)) return false;
  if (field.set(text)) return true;
  std::vector<std::string> words;
  for (std::string_view w : field.words()) words.emplace_back(w);
  std::string list;
  for (const std::string& w : words) list += (list.empty() ? "" : "|") + w;
  std::string msg = "must be one of " + list + ", got " + shown_text(text);
  const std::string guess = closest_word(text, words);
  if (!guess.empty()) msg += "; did you mean " + guess + "?";
  sink.add(key, mark, msg);
  return false;
}

bool set_list(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark,
              std::vector<std::string>* field, ErrorSink& sink) {
  const std::string key(spec.path);
  std::vector<std::string> items;
  if (!value.IsDefined() || value.IsNull()) {
    // an empty list
  } else if (value.IsScalar()) {
    if (value.Scalar().empty()) {
      sink.add(key, mark, "expected a non-empty string or a list, got an empty string");
      return false;
    }
    if (!untagged(key, value, mark, sink)) return false;
    if (refused_string(key, value.Scalar(), mark, sink)) return false;
    items.push_back(value.Scalar());
  } else if (value.IsSequence()) {
    bool ok = true;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_key = key + "[" + std::to_string(i) + "]";
      if (!item.IsScalar() || item.Scalar().empty()) {
        sink.add(item_key, value_mark(item, mark),
                 "expected a non-empty string, got " +
                     (item.IsScalar() ? "an empty string" : describe_node(item)));
        ok = false;
      } else if (!untagged(item_key, item, value_mark(item, mark), sink) ||
                 refused_string(item_key, item.Scalar(), value_mark(item, mark), sink)) {
        ok = false;
      } else {
        items.push_back(item.Scalar());
      }
    }
    if (!ok) return false;
  } else {
    sink.add(key, mark, "expected a string or a list of strings, got " + describe_node(value));
    return false;
  }
  *field = std::move(items);
  return true;
}

// Map entry names become environment variable names.
bool check_entry(const std::string& key, const std::string& name, const YAML::Node& value,
                 const YAML::Mark& mark, ErrorSink& sink) {
  if (refused_string(key, name, mark, sink)) return false;
  if (!is_identifier(name)) {
    sink.add(
        key, mark,
        shown_text(name) + " is not a valid name (a letter or '_', then letters, digits, '_')");
    return false;
  }
  if (value.IsDefined() && !value.IsNull() && !value.IsScalar()) {
    sink.add(key + "." + name, value_mark(value, mark),
             "expected a string, got " + describe_node(value));
    return false;
  }
  if (value.IsScalar() &&
      refused_string(key + "." + name, value.Scalar(), value_mark(value, mark), sink)) {
    return false;
  }
  return true;
}

bool set_map(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& mark,
             std::map<std::string, std::string>* field, ErrorSink& sink) {
  const std::string key(spec.path);
  std::map<std::string, std::string> entries;
  if (value.IsDefined() && !value.IsNull()) {
    if (!value.IsMap()) {
      sink.add(key, mark, "expected a map of NAME: value, got " + describe_node(value));
      return false;
    }
    bool ok = true;
    for (const auto& kv : value) {
      const YAML::Mark entry_mark = kv.first.Mark();
      if (!kv.first.IsScalar()) {
        sink.add(key, entry_mark,
                 "expected a NAME: value entry, got a key that is " + describe_node(kv.first));
        ok = false;
        continue;
      }
      const std::string name = kv.first.Scalar();
      if (!check_entry(key, name, kv.second, entry_mark, sink)) {
        ok = false;
      } else if (entries.count(name)) {
        sink.add(key + "." + name, entry_mark, "duplicate key");
        ok = false;
      } else {
        entries[name] = kv.second.IsScalar() ? kv.second.Scalar() : "";
      }
    }
    if (!ok) return false;
  }
  *field = std::move(entries);
  return true;
}

}  // namespace

std::string describe_node(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "an empty value";
  if (n.IsSequence()) return "a sequence";
  if (n.IsMap()) return "a map";
  if (const std::string tag = explicit_tag(n); !tag.empty()) {
    return "the value tagged " + tag + " " + shown_text(n.Scalar()) +
           " (YAML tags are not read: write the value itself)";
  }
  if (n.Tag() != "?") return "the quoted string " + shown_text(n.Scalar(), '"');
  return shown_text(n.Scalar());
}

YAML::Mark value_mark(const YAML::Node& value, const YAML::Mark& key_mark) {
  if (value.IsDefined() && !value.IsNull() && has_position(value.Mark())) return value.Mark();
  return key_mark;
}

void ErrorSink::add(const std::string& key, const YAML::Mark& mark, const std::string& message) {
  ConfigError e;
  e.file = file_;
  e.key = key;
  e.message = message;
  if (!is_override() && has_position(mark)) {
    e.line = mark.line + 1;
    e.col = mark.column + 1;
  }
  out_->push_back(std::move(e));
}

std::string shown_text(const std::string& text, char quote, size_t shown) {
  // Long texts are cut at a character boundary; line breaks and tabs are shown escaped, so the
  // message stays on one line.
  size_t cut = text.size();
  if (text.size() > shown + 20) {
    cut = shown;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  const std::string q = quote == '\0' ? "" : std::string(1, quote);
  std::string out = q;
  for (size_t i = 0; i < cut; ++i) {
    const char c = text[i];
    out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : std::string(1, c);
  }
  if (cut == text.size()) return out + q;
  return out + "..." + q + " (" + std::to_string(text.size()) + " bytes)";
}

bool parse_integer_text(const std::string& text, long long* out) {
  if (!is_integer_text(text, true)) return false;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  if (out) *out = v;
  return true;
}

bool parse_unsigned_text(const std::string& text, unsigned long long* out) {
  if (!is_integer_text(text, false)) return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  if (out) *out = v;
  return true;
}

bool parse_float_text(const std::string& text, double* out) {
  return classify_float(text, out) == FloatText::kFinite;
}

bool parse_value(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& key_mark,
                 JobConfig& cfg, ErrorSink& sink) {
  const YAML::Mark mark = value_mark(value, key_mark);
  struct Visitor {
    const KeySpec& spec;
    const YAML::Node& value;
    const YAML::Mark& mark;
    ErrorSink& sink;
    bool operator()(int* f) { return set_integer(spec, value, mark, f, sink); }
    bool operator()(int64_t* f) { return set_integer(spec, value, mark, f, sink); }
    bool operator()(uint64_t* f) { return set_integer(spec, value, mark, f, sink); }
    bool operator()(double* f) { return set_float(spec, value, mark, f, sink); }
    bool operator()(bool* f) { return set_bool(spec, value, mark, f, sink); }
    bool operator()(std::string* f) { return set_string(spec, value, mark, f, sink); }
    bool operator()(const ChoiceRef& f) { return set_choice(spec, value, mark, f, sink); }
    bool operator()(std::vector<std::string>* f) { return set_list(spec, value, mark, f, sink); }
    bool operator()(std::map<std::string, std::string>* f) {
      return set_map(spec, value, mark, f, sink);
    }
  };
  return std::visit(Visitor{spec, value, mark, sink}, spec.field(cfg));
}

bool parse_map_entry(const KeySpec& spec, const std::string& name, const YAML::Node& value,
                     const YAML::Mark& key_mark, JobConfig& cfg, ErrorSink& sink) {
  FieldRef ref = spec.field(cfg);
  auto* field = std::get_if<std::map<std::string, std::string>*>(&ref);
  if (!field) return false;
  const std::string key(spec.path);
  if (!check_entry(key, name, value, key_mark, sink)) return false;
  (**field)[name] = value.IsScalar() ? value.Scalar() : "";
  return true;
}

}  // namespace rm
