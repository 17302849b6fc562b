// Memory sizes as Slurm writes them (`--mem`, sinfo's RealMemory): an integer with an optional
// unit suffix K, M, G or T (powers of 1024; no suffix means megabytes, as for `--mem`).
#pragma once

#include <string>

namespace rm {

// Bytes, or a negative number when `text` is not such a size ("", "1.5G", "64GB", "-1").
double parse_slurm_memory(const std::string& text);

}  // namespace rm
