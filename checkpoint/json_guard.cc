#include "checkpoint/json_guard.h"

namespace rm {

std::string check_json_shape(std::string_view text, int max_depth, size_t max_values) {
  int depth = 0;
  size_t values = 1;  // the root
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        if (++depth > max_depth) {
          return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
        }
        [[fallthrough]];
      case ',':
      case ':':
        if (++values > max_values) {
          return "more than " + std::to_string(max_values) + " JSON values";
        }
        break;
      case '}':
      case ']':
        --depth;
        break;
      default:
        break;
    }
  }
  return "";
}

}  // namespace rm
