// Measurements for `ringmaster bench ckpt`'s in-memory rows (checkpoint.memory_every): a
// MemorySnapshot (checkpoint/memory_snapshot.h) save and restore of each rank's shard of a
// BenchState, one rank after another, against plain memcpy into and out of a shared-memory
// mapping of the same size. Every segment is made, and its pages touched by a save into each
// slot, before the clock starts; all are removed before returning, also on an exception.
#pragma once

#include <cstdint>

#include "bench/bench_io.h"

namespace rm {

struct MemorySnapshotTimes {
  double memcpy_in = 0;   // baseline: the shards copied into /dev/shm
  double save = 0;        // MemorySnapshot::save of every shard: copy, XXH64, commit
  double memcpy_out = 0;  // baseline: the shards copied back out
  double restore = 0;     // MemorySnapshot::restore of every shard, checksums verified
};

// Seconds for each of the four, over all `ranks` shards. `state` is scrambled before the
// restore and checked after it (CheckpointError if an element differs).
MemorySnapshotTimes bench_memory_snapshot(BenchState& state, int ranks);

// The bytes of /dev/shm that bench_memory_snapshot(state, ranks) takes at once: a segment of two
// slots per shard and the plain mapping of the largest shard.
uint64_t memory_snapshot_bench_bytes(const BenchState& state, int ranks);

}  // namespace rm
