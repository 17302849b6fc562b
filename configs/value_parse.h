// Strict parsing of one YAML value into the JobConfig field its KeySpec names.
//
// yaml-cpp's own conversions are too lenient for a job file ("yes" is a bool, "1.5" fails as an
// int with no message), so scalars are checked here from their raw text:
//   int     optional sign + decimal digits, within the field type's limits and the key's range
//   float   anything strtod() reads completely (ints included) that is finite: not nan or
//           inf (also YAML's .inf, .nan), not beyond the largest double (1e400)
//   bool    exactly true or false
//   string  any scalar of at most 4096 bytes; null (empty value, ~) = ""
//   enum    one of the key's words, with a did-you-mean
//   list    a sequence of non-empty strings (at most 4096 bytes each), or one scalar = a
//           one-item list; null = []
//   map     a map of NAME: scalar, NAME a letter or '_' then letters, digits, '_' (at most
//           4096 bytes); null = {}
// Numbers and bools must be plain scalars: a quoted "5" is a string, as in YAML.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "configs/config_error.h"
#include "configs/schema.h"

namespace rm {

// Collects the errors of one source: the job file (positions kept) or a --set override
// (file = kOverrideSource, positions dropped since they would point into the override text).
class ErrorSink {
 public:
  ErrorSink(std::string file, std::vector<ConfigError>* out) : file_(std::move(file)), out_(out) {}

  bool is_override() const { return file_ == kOverrideSource; }
  const std::string& file() const { return file_; }
  // Records an error at `mark` (0-based, as yaml-cpp gives it; a null mark = no position).
  void add(const std::string& key, const YAML::Mark& mark, const std::string& message);

 private:
  std::string file_;
  std::vector<ConfigError>* out_;
};

// Sets the field of `spec` in `cfg` from `value`. `key_mark` is where the key was written; an
// error points at the value when it has a position, else at the key. Returns false (and leaves
// the field unchanged) if the value was rejected; every problem found is added to `sink`.
bool parse_value(const KeySpec& spec, const YAML::Node& value, const YAML::Mark& key_mark,
                 JobConfig& cfg, ErrorSink& sink);

// Sets one entry `name` of the string-map key `spec` (--set cluster.env.NAME=value).
bool parse_map_entry(const KeySpec& spec, const std::string& name, const YAML::Node& value,
                     const YAML::Mark& key_mark, JobConfig& cfg, ErrorSink& sink);

// "'abc'", "a sequence", "a map", "an empty value", "the quoted string \"5\"": what a message
// says the user gave ("expected an integer, got 'abc'").
std::string describe_node(const YAML::Node& n);

// `text` between quotes for a message, line breaks and tabs escaped (\n); a text over `shown` +
// 20 bytes is cut to its first `shown` and followed by its size ("'99999...' (500000 bytes)"),
// so a hostile value still gives a one-line message. quote '\0': no quotes (for numbers).
std::string shown_text(const std::string& text, char quote = '\'', size_t shown = 60);

// Where an error about `value` points: the value, or its key when the value has no text of its
// own (yaml-cpp gives an empty value the position of whatever follows it).
YAML::Mark value_mark(const YAML::Node& value, const YAML::Mark& key_mark);

// The raw-text rules above, exposed for tests. parse_integer_text accepts [+-]?[0-9]+ and fails
// on overflow of long long; the unsigned variant also rejects a '-' sign.
bool parse_integer_text(const std::string& text, long long* out);
bool parse_unsigned_text(const std::string& text, unsigned long long* out);
bool parse_float_text(const std::string& text, double* out);

}  // namespace rm
