#include "configs/suggest.h"

#include <algorithm>
#include <cctype>

#include "configs/schema.h"

namespace rm {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_known(const std::string& path) {
  return find_key(path) || is_section(path);
}

}  // namespace

int edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] = distance between a[0, i) and b[0, j). Keys are short; the full table is fine.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  // Short words tolerate one edit, longer ones proportionally more; beyond that a suggestion
  // is more often noise than help.
  const int limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string best;
  int best_distance = limit + 1;
  const std::string lw = lower(word);
  for (const std::string& c : candidates) {
    // The distance is at least the difference in length: skip the table when that is too far
    // already (and a hostile 1 MB key costs nothing).
    const size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap > static_cast<size_t>(limit)) continue;
    const int d = lower(c) == lw ? 0 : edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  if (!best.empty() || word.size() < 3) return best;
  // An abbreviation ("warmup" for warmup_steps), if only one candidate starts with it.
  for (const std::string& c : candidates) {
    if (lower(c).compare(0, lw.size(), lw) == 0) {
      if (!best.empty()) return "";
      best = c;
    }
  }
  return best;
}

std::string suggest_key(std::string_view path) {
  const std::vector<std::string> parts = split_path(path);
  std::string prefix;  // the known section the unknown component sits in
  size_t i = 0;
  for (; i < parts.size(); ++i) {
    const std::string next = prefix.empty() ? parts[i] : prefix + "." + parts[i];
    if (!is_section(next) || find_key(next)) break;
    prefix = next;
  }
  if (i == parts.size()) return "";  // a whole section named: nothing is misspelt

  std::string rest;
  for (size_t j = i + 1; j < parts.size(); ++j) rest += "." + parts[j];
  const std::string guess = closest_word(parts[i], children(prefix));
  if (!guess.empty()) {
    const std::string head = prefix.empty() ? guess : prefix + "." + guess;
    if (!rest.empty() && is_known(head + rest)) return head + rest;
    if (head != path) return head;
  }
  // "train.lr": the leaf exists, in another section.
  if (rest.empty()) {
    std::string found;
    for (const KeySpec& k : job_schema()) {
      const std::string_view leaf = k.path.substr(k.path.rfind('.') + 1);
      if (leaf == parts[i] && k.path != path) {
        found += (found.empty() ? "" : " or ") + std::string(k.path);
      }
    }
    return found;
  }
  return "";
}

}  // namespace rm
