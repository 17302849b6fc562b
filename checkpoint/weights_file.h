// The final weights of a run as one checksummed file (RUN_DIR/weights.bin):
//   8 bytes magic "RMWGHT01" | uint64 float count | uint64 XXH64 of the payload | float32[count]
// little-endian. Written atomically (atomic_file.h); loading checks magic, size and checksum
// before returning anything. (The checkpoint format of the checkpoint issue supersedes this.)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rm {

void save_weights(const std::string& path, const float* params, size_t count);

// Throws IoError naming the file and the check that failed (magic, count, size, checksum).
std::vector<float> load_weights(const std::string& path, size_t expected_count);

}  // namespace rm
