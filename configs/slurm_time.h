// Time limits as Slurm writes them (`--time`, `cluster.time`): MIN, MIN:SEC, HH:MM:SS, D-HH,
// D-HH:MM, D-HH:MM:SS, or UNLIMITED / INFINITE (any case).
#pragma once

#include <cstdint>
#include <string>

namespace rm {

// Seconds; 0 for UNLIMITED or INFINITE; -1 when `text` is no such limit or longer than 100 years
// (Slurm keeps minutes in 32 bits and showed "99999999999" as a garbage limit).
int64_t slurm_time_seconds(const std::string& text);

}  // namespace rm
