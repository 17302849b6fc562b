// Guards a job's text passes before and after yaml-cpp reads it, so that a hostile or broken file
// is refused in milliseconds with one message instead of costing seconds, gigabytes or the stack.
//
// Why before: yaml-cpp 0.7 (Debian 12) builds ~500 bytes of nodes per item and takes ~1 s and
// ~500 MiB for 1 MiB of "{a,a,a,...}"; it stops deep nesting itself only at ~500 levels, and
// then with the message "bad file". Why after: aliases share nodes inside yaml-cpp, so a
// "billion laughs" file parses in microseconds, but anything that walks the tree expands them.
//
// The limits, and why they are safe for real jobs (the schema nests 3 levels, cluster.env.NAME,
// and the shipped jobs hold under 100 items):
//   kMaxJobBytes       1 MiB     a job file is a few KiB; also bounds every scan below
//   kMaxYamlDepth      64        nesting levels, block indentation and flow brackets together
//   kMaxYamlAliases    256       uses of *name; a job file needs few or none
//   kMaxYamlSeparators 20000     separators: ',' '[' '{' ':', "- ", "? " and "---"; a
//                                node needs one, so this bounds yaml-cpp's memory to ~30 MiB
//                                and its time to ~50 ms
//   kMaxYamlNodes      200000    nodes met while walking the parsed tree, aliases expanded;
//                                within kMaxYamlSeparators a text holds at most ~3 nodes per
//                                separator, so only aliases can get here
//
// Separators are counted everywhere, quoted strings and comments included: no quoting trick can
// get a costly text past that count, and a real job has a few hundred. Depth and aliases are
// counted lexically (quoted, plain and block scalars and comments skipped), since brackets in
// strings and comments are common; where the scan cannot tell (a plain scalar continued on the
// next line) it over-counts. What fools it is still caught behind it: by yaml-cpp's own depth
// limit and by the node walk.
// Thread-safe: no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace rm {

inline constexpr size_t kMaxJobBytes = size_t{1} << 20;
inline constexpr int kMaxYamlDepth = 64;
inline constexpr int kMaxYamlAliases = 256;
inline constexpr int kMaxYamlSeparators = 20000;
inline constexpr size_t kMaxYamlNodes = 200000;

// What is wrong with a text, and where: 1-based line and column (in characters), 0 = the whole
// text. The message names the problem, e.g. "not a text file: a NUL byte".
struct TextProblem {
  int line = 0;
  int col = 0;
  std::string message;
};

// Checks, in order, and returns the first problem: the size (kMaxJobBytes); the encoding (UTF-8,
// no NUL, no control characters except tab, CR and LF; a UTF-8 byte order mark is fine); then
// the structure (kMaxYamlDepth, kMaxYamlAliases, kMaxYamlSeparators). nullopt if the text may
// be handed to yaml-cpp. Linear in the text's size.
std::optional<TextProblem> check_job_text(std::string_view text);

// "too large for a job file: N bytes, the limit is 1048576 (1 MiB)"
std::string job_too_large(uint64_t bytes, const std::string& kind = "job file");

// The two halves of check_job_text, for tests and for texts whose size is already checked.
std::optional<TextProblem> check_text_encoding(std::string_view text);
std::optional<TextProblem> check_yaml_structure(std::string_view text);

// YAML::LoadAll(text), minus a hang of yaml-cpp 0.7 (Debian 12): a document that begins with a
// token no value can begin with (',' outside [ ] and { }: ",", "--- ,", "!tag ,") is read as an
// empty document that consumes nothing, again and again, allocating each time (yaml-cpp issue
// #1040, fixed upstream in 2024). The structure scan cannot refuse that ',' by itself, since
// "a\n, b" is a valid plain scalar ("a , b"). Throws YAML::ParserException at that token
// instead, as for any other invalid YAML. Costs one more event-only parse of the text.
std::vector<YAML::Node> load_all_documents(const std::string& text);

// Whether walking `root` with aliases expanded meets more than `limit` nodes. Stops counting at
// limit + 1, so it costs at most that many steps; iterative, so no depth can overflow the stack.
bool yaml_expands_beyond(const YAML::Node& root, size_t limit = kMaxYamlNodes);

}  // namespace rm
