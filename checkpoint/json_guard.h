// A pre-scan of JSON text before nlohmann builds a tree of it (checkpoint/'s readers, and
// worker/initial_weights.cc for the JSON inside a safetensors file's metadata).
//
// nlohmann holds every value in 16 bytes plus, for object members, a map node: ~100 bytes per
// value, so 64 MiB of "[0,0,0,...]" or {"k1":0,"k2":0,...} would become 0.5-1 GiB of tree. Its
// dump() and comparisons also recurse once per nesting level. The scan bounds both from the
// text alone: it counts the places a value can begin (',' '[' '{' ':') and the nesting depth,
// skipping string contents. Invalid JSON that fools it fails in the parser anyway.
// Pure and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rm {

// A manifest holds 48 values per rank (its file entry: three pieces of six members) and ~8 per
// tensor: 2^22 is ~87,000 ranks, about where its text reaches kMaxManifestBytes (manifest.h) too,
// and bounds the tree to ~400 MiB. (2^20 stopped at ~21,800 ranks, so larger jobs wrote
// checkpoints that no reader accepted; commit_checkpoint now refuses what this refuses.)
inline constexpr size_t kMaxJsonValues = size_t{1} << 22;
inline constexpr int kMaxJsonDepth = 64;

// "" if `text` is within the limits, else what is wrong: "JSON nested deeper than 64 levels",
// "more than 4194304 JSON values".
std::string check_json_shape(std::string_view text, int max_depth = kMaxJsonDepth,
                             size_t max_values = kMaxJsonValues);

}  // namespace rm
