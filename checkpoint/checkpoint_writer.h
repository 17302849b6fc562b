// Writing a checkpoint: every rank writes its shard into step_N.tmp/, then rank 0 commits the
// step by writing manifest.json and renaming step_N.tmp -> step_N.
//
// Protocol (the order is what makes a crash at any moment harmless):
//   1. every rank   prepare_checkpoint_dir(run_dir, step)          -> tmp_dir (mkdir -p)
//   2. every rank   write_shard(tmp_dir, rank, slices)             -> ShardFileInfo
//                   shard_RRRRR.bin is written, fsynced and read back (every piece's
//                   checksum), THEN its descriptor shard_RRRRR.json appears (whole, by rename;
//                   not itself fsynced): a descriptor means a durable shard that read back as
//                   written. Each rank checks its own, at once; retention then needs no second
//                   read of the checkpoint just committed (retention.h).
//   3. rank 0       once every rank is done -- either the caller synchronises (barrier, or a
//                   gather of the ShardFileInfos) or rank 0 waits for the descriptors with
//                   collect_shards() -- fills manifest.files and calls commit_checkpoint(),
//                   which checks the manifest and the files' sizes, writes and fsyncs
//                   manifest.json, fsyncs step_N.tmp/, renames it to step_N and fsyncs
//                   checkpoints/.
// Until the rename, step_N does not exist and readers ignore step_N.tmp; after it, step_N is
// complete and durable. A crash leaves earlier checkpoints untouched and at worst a .tmp
// directory, which is never read and is removed by remove_incomplete_checkpoints() (call it on
// rank 0 at start-up, before any rank saves) and by apply_retention() after a later commit.
// Re-committing an existing step (a job that resumed from an older checkpoint and reached the
// step again) atomically exchanges the directories, so step_N is never missing.
//
// Write path: one file and one fsync per rank; slices are written back to back with write(2)
// calls of 256 KiB straight from the caller's memory (no copy), each chunk hashed (XXH64)
// just before it is written, while it is in the L2 cache (8 MiB chunks read every byte from
// memory twice: a 1 GiB save took 1.88 s against 1.31 s with 256 KiB, plain write 1.01 s).
//
// All functions block, are safe to call from any thread (no shared state), and throw
// CheckpointError (IoError for failed system calls, with the errno text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"

namespace rm {

// A slice of a flat buffer to save: elements [begin, end) of `buffer`, read from `data`
// (end - begin floats, owned by the caller, only read during the call).
struct ShardSlice {
  std::string buffer;
  uint64_t begin = 0, end = 0;
  const float* data = nullptr;
};

// Creates RUN_DIR/checkpoints/step_N.tmp/ (and its parents) if missing; returns its path.
// Ranks may call it concurrently.
std::string prepare_checkpoint_dir(const std::string& run_dir, int64_t step);

// Writes `slices`, in order, to tmp_dir/shard_RRRRR.bin, fsyncs it, reads it back (throws
// IoError, EIO, when a piece does not hash as written: no descriptor then), then writes the
// descriptor tmp_dir/shard_RRRRR.json. Returns the file's entry for the manifest.
ShardFileInfo write_shard(const std::string& tmp_dir, int64_t step, int rank,
                          const std::vector<ShardSlice>& slices);

// Reads the descriptors of ranks 0..writers-1 from tmp_dir, waiting up to timeout_s seconds for
// missing ones (0: no waiting). Checks each against its shard file's size. The way for rank 0
// to learn the other ranks' pieces without a collective (e.g. from a background thread).
std::vector<ShardFileInfo> collect_shards(const std::string& tmp_dir, int64_t step, int writers,
                                          double timeout_s);

// Rank 0, after every shard is written: commits step_N.tmp as step_N (see above). manifest.files
// must list every shard file; files in step_N.tmp that it does not list (the descriptors) are
// removed. Returns the checkpoint's path.
std::string commit_checkpoint(const std::string& run_dir, int64_t step, const Manifest& manifest);

// Removes every scratch directory (step_*.tmp) under RUN_DIR/checkpoints/ of a step up to
// `up_to_step` (all by default), and the scratch of a best link (best.tmp.PID,
// io::replace_symlink) a crash left; returns their paths. Only where no save of those steps can
// still commit: at start-up (on rank 0, before the ranks' first save); on the committing rank
// once its save of `up_to_step` has failed (a rank late with its shard then fails its own save,
// which could not commit anyway); at a run's end, once every rank's saves are done.
std::vector<std::string> remove_incomplete_checkpoints(const std::string& run_dir,
                                                       int64_t up_to_step = INT64_MAX);

// A save of a step that was already committed, where the file system has no RENAME_EXCHANGE
// (NFS), moves the old step_N aside as step_N.replaced.tmp and then step_N.tmp in: a crash or a
// power cut between the two renames leaves no step_N, and the old checkpoint, whole, under a
// scratch name that remove_incomplete_checkpoints() would remove. This puts each such one back
// as step_N where step_N is missing (the replace never happened), says so on stdout, and
// returns their paths; where step_N is there the replace happened, and the old one is scratch.
// Call it holding the run lock, before anything looks for a checkpoint to resume.
std::vector<std::string> restore_replaced_checkpoints(const std::string& run_dir);

// Observers of the phases of a save: called with a phase name ("shard:write", "shard:fsync",
// "shard:verify", "shard:descriptor", "commit:manifest", "commit:rename", "commit:fsync",
// "commit:done", "retention:delete") as each begins, on the thread that saves -- so a crash test
// can kill a rank there, and a trace (observe/trace_recorder.h) can time each stage. At most 4 at
// once; adding one already there, or removing one that is not, does nothing. Every phase event is
// also a beat of io_progress.h (and names its activity), hook or not, and a note in the fault
// layer's journal (io/fault_file_system.h), which also gets "shard:prepare", "shard:done",
// "commit:prepare" and "retention:done" (no phase events): from the journal a test tells where a
// kill landed.
using CheckpointPhaseHook = void (*)(const char* phase);
void add_checkpoint_phase_hook(CheckpointPhaseHook hook);
void remove_checkpoint_phase_hook(CheckpointPhaseHook hook);
void checkpoint_phase(const char* phase);  // calls every hook

}  // namespace rm
