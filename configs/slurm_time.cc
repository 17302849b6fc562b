#include "configs/slurm_time.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace rm {

namespace {

constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 24 * 3600;

// Non-empty decimal digits, at most 9 (no overflow below), or -1.
int64_t number(const std::string& s) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return -1;
  }
  return std::stoll(s);
}

std::vector<int64_t> colon_fields(const std::string& s) {
  std::vector<int64_t> out;
  size_t from = 0;
  for (;;) {
    const size_t colon = s.find(':', from);
    out.push_back(number(s.substr(from, colon == std::string::npos ? colon : colon - from)));
    if (colon == std::string::npos) return out;
    from = colon + 1;
  }
}

}  // namespace

int64_t slurm_time_seconds(const std::string& text) {
  std::string lower;
  for (unsigned char c : text) lower += static_cast<char>(std::tolower(c));
  if (lower == "unlimited" || lower == "infinite") return 0;
  const size_t dash = text.find('-');
  const int64_t days = dash == std::string::npos ? 0 : number(text.substr(0, dash));
  const std::vector<int64_t> f =
      colon_fields(dash == std::string::npos ? text : text.substr(dash + 1));
  if (days < 0 || f.size() > 3 ||
      std::any_of(f.begin(), f.end(), [](int64_t v) { return v < 0; })) {
    return -1;
  }
  int64_t seconds = 0;
  if (dash != std::string::npos) {  // D-H, D-H:M, D-H:M:S
    seconds =
        days * 86400 + f[0] * 3600 + (f.size() > 1 ? f[1] * 60 : 0) + (f.size() > 2 ? f[2] : 0);
  } else if (f.size() == 1) {  // M
    seconds = f[0] * 60;
  } else if (f.size() == 2) {  // M:S
    seconds = f[0] * 60 + f[1];
  } else {  // H:M:S
    seconds = f[0] * 3600 + f[1] * 60 + f[2];
  }
  return seconds <= kMaxSeconds ? seconds : -1;
}

}  // namespace rm
