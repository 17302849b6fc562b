// Checks shared by manifest parsing and validation (internal to checkpoint/).
#pragma once

#include <string>

#include "checkpoint/manifest.h"

namespace rm {

// Throws CheckpointError "<path>: <field>: <what>" (field omitted when empty).
[[noreturn]] void manifest_fail(const std::string& path, const std::string& field,
                                const std::string& what);

// A plain file name: 1-255 chars of [A-Za-z0-9_.-], not starting with '.', so never "..",
// never a path, never hidden, and never the manifest itself.
bool is_plain_file_name(const std::string& name);

// One shard file entry on its own: name, rank in [0, world_size), size and pieces in bounds,
// pieces not overlapping inside the file. Buffer membership is checked by validate_manifest.
void validate_file_entry(const ShardFileInfo& file, int world_size, const std::string& path,
                         const std::string& field);

}  // namespace rm
