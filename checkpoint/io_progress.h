// Progress of checkpoint I/O in this process, for a watchdog (worker/watchdog.h) that must tell
// a long save or load that is moving from one that is stuck.
//
// checkpoint/ beats once per chunk read or written (256 KiB), once per phase event of a save
// (checkpoint_writer.h's checkpoint_phase), and once per shard descriptor rank 0 collects. A beat
// is one relaxed atomic increment: free next to the chunk's write(2). Waiting (for the other
// ranks' descriptors) is not progress; fsync(2) is one call, so a watchdog's timeout must exceed
// the longest fsync of one rank's shard.
//
// Thread-safe: the async writer's thread and the training thread may both beat; any thread may
// read. Nothing here knows about watchdogs, ranks or models.
#pragma once

#include <cstdint>

namespace rm {

// One chunk (or phase, or descriptor) of checkpoint I/O done.
void note_io_progress();
// Beats so far in this process.
uint64_t io_progress_count();

// What checkpoint I/O this process began last, for messages: a static string, e.g. the phase
// names of checkpoint_writer.h ("shard:write", "commit:rename", ...), "shard:collect" (rank 0
// waiting for the other ranks' shards) or "read"; "" before any. It is not cleared when the I/O
// ends.
void set_io_activity(const char* what);
const char* io_activity();

// Testing (worker/fault_injection.h, RM_TEST_FAULT=slowio): called by every note_io_progress,
// on the beating thread, after the count has moved, e.g. to make I/O slow but alive. nullptr
// (the default) disables it.
using IoProgressHook = void (*)();
void set_io_progress_hook(IoProgressHook hook);

}  // namespace rm
