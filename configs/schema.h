// The job schema: one table that binds every YAML key path to its JobConfig field, type, default,
// allowed values and one-line documentation.
//
// The table (schema.cc) is the single source of truth: the loader parses and range-checks with
// it, to_yaml() writes the resolved job from it and docs/job-reference.md is generated from it.
// A key's path is also the C++ member path (model.width <-> JobConfig::model.width), so the
// table cannot name a field under a different key. Cross-field rules (width divisible by heads,
// batch arithmetic, ...) are not in the table; they live in job_checks.cc.
//
// The table is built once on first use and is immutable afterwards; safe to read from any thread.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "configs/job_choices.h"
#include "configs/job_config.h"

namespace rm {

// A pointer to a choice-valued field (an enum of configs/job_choices.h) with its words: the
// loader sets it by word, the writer prints its word, without knowing which enum it is.
class ChoiceRef {
 public:
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  ChoiceRef(E* field)  // NOLINT(google-explicit-constructor): FieldRef converts from E*
      : field_(field),
        words_(kChoiceWords<E>.data()),
        count_(kChoiceWords<E>.size()),
        word_([](const void* f) { return choice_name(*static_cast<const E*>(f)); }),
        set_([](void* f, std::string_view w) { return parse_choice(w, static_cast<E*>(f)); }) {}

  std::vector<std::string_view> words() const { return {words_, words_ + count_}; }
  const void* address() const { return field_; }  // the field's, to tell fields apart
  const char* word() const { return word_(field_); }
  // Sets the field to the choice spelled `word`; false (field untouched) if there is none.
  bool set(std::string_view word) const { return set_(field_, word); }

 private:
  void* field_;
  const std::string_view* words_;
  size_t count_;
  const char* (*word_)(const void*);
  bool (*set_)(void*, std::string_view);
};

// A pointer to one field of a JobConfig. The alternative decides how the key is parsed and
// printed: int / int64_t / uint64_t are integers (each with its own limits), double a number,
// ChoiceRef one of an enum's words, vector a list of strings, map a string -> string map.
using FieldRef = std::variant<int*, int64_t*, uint64_t*, double*, bool*, std::string*, ChoiceRef,
                              std::vector<std::string>*, std::map<std::string, std::string>*>;

enum class KeyType { kInt, kFloat, kBool, kString, kEnum, kStringList, kStringMap };

// What a key accepts beyond its type.
struct Constraint {
  // Numeric range, inclusive unless *_open; +-infinity = unbounded (the field type's own limits
  // still apply to integers).
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;
  // The words of a choice-valued key (filled in from its enum: configs/job_choices.h); empty
  // for every other key.
  std::vector<std::string_view> choices;
  // Extra rule for a string value: returns "" if `value` is fine, else what is wrong
  // ("must be non-empty"); the reference doc shows `note` for it.
  std::string (*check)(const std::string& value) = nullptr;
  std::string_view note;  // shown in the reference doc's "allowed" column
};

struct KeySpec {
  std::string_view path;          // "model.width"
  FieldRef (*field)(JobConfig&);  // the field this key sets
  Constraint allowed;
  std::string_view doc;           // one line, shown in the reference doc
  std::string_view default_note;  // shown instead of the struct default when non-empty

  KeyType type() const;
  std::string_view type_name() const;  // "int", "int64", "uint64", "float", "bool", ...
  std::string default_text() const;    // default_note, or the YAML text of the struct default
  std::string allowed_text() const;    // ">= 1", "[0, 0.5]", "`gpt`, `mlp`", ...
};

// Every key, sections in the order a job file is written.
const std::vector<KeySpec>& job_schema();

// The spec of the key at `path`, or nullptr.
const KeySpec* find_key(std::string_view path);

// The names of a dotted key path: "model.width" -> {"model", "width"}; "" -> {""}.
std::vector<std::string> split_path(std::string_view path);

// True if `path` is a section ("model", "cluster"): a proper prefix of some key path.
// The root "" is a section too.
bool is_section(std::string_view path);

// The names one level below section `path` ("" = top level), in schema order, without
// duplicates: children("") = {"name", "run_dir", "seed", "model", ...}.
std::vector<std::string> children(std::string_view path);

// The range of c as the reference doc and error messages write it: ">= 1", "> 0", "[0, 0.5]",
// "[0, 1)"; "" if unbounded.
std::string range_text(const Constraint& c);

}  // namespace rm
