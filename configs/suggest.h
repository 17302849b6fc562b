// "Did you mean ...?" for misspelt keys and enum values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rm {

// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters each cost 1 ("widht" -> "width" is 1).
int edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo (a case-only
// difference always is), else the one candidate `word` abbreviates ("warmup" -> warmup_steps),
// else "".
std::string closest_word(std::string_view word, const std::vector<std::string>& candidates);

// For an unknown key path ("model.widht", "train.lr", "modle.width"): the known key or section
// the user probably meant ("model.width", "optimizer.lr", "model.width"), or "".
// Tries siblings of the first unknown component, then the same leaf name in other sections.
std::string suggest_key(std::string_view path);

}  // namespace rm
