// Measurements for `ringmaster bench ckpt`: the checkpoint writer against the plain baseline of
// the same bytes. Both write real files under `dir`, fsync them, time it, and delete them.
// The source buffers are allocated and touched before the clock starts. Blocking; throws
// CheckpointError.
#pragma once

#include <cstddef>
#include <string>

namespace rm {

// Seconds to write `bytes` to one new file with large write(2) calls and fsync it.
double bench_write_fsync(const std::string& dir, size_t bytes);

// Seconds for a whole checkpoint save of `bytes` of float data split evenly over `ranks` shard
// files written one after another (write_shard for each, then commit_checkpoint), as one
// process with `ranks` ranks would do.
double bench_checkpoint_save(const std::string& dir, size_t bytes, int ranks);

}  // namespace rm
