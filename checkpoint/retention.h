// Retention: which checkpoints to delete once a newer one is committed.
//
// apply_retention(run_dir, keep, keep_every, keep_best, wait, read_back_step):
//   - the anchor is the newest committed checkpoint that verifies with checksums (normally the
//     one just committed). No anchor: nothing is deleted. The checkpoint of `read_back_step`,
//     the one the caller has just committed, is checked structurally only (manifest, files,
//     sizes): its writers read their shards back as they wrote them (write_shard), which is
//     the verification "a checkpoint is done when it is verified" asks for -- made by every
//     rank of its own shard at once, where rank 0 used to read every byte of every rank's again
//     here, alone, at each save. The caller passes it only with keep >= 2 (async_writer.cc): a
//     read-back may see the page cache, and with keep 1 the anchor's check decides whether the
//     last other copy goes.
//   - kept: the anchor and the keep-1 next older checkpoints that verify structurally
//     (manifest, files, sizes), plus every one whose step is divisible by keep_every (> 0), plus
//     with keep_best the best: of the checkpoints up to the anchor that verify structurally and
//     whose manifest state says "best": true with a numeric "best_val_loss" (checkpoint.keep_best
//     marks a save so when its evaluation beat every earlier one), the lowest loss, the newest
//     of equals. RUN_DIR/checkpoints/best is then made a symbolic link to it (kBestLink) before
//     anything is deleted: a pointer for people and tools, made again at every retention from
//     the manifests, which are what counts (a file system that refuses the link costs a
//     warning, not the save). Without keep_best a link left by an earlier run is removed, as
//     what it points to is no longer kept.
//   - deleted: the other structurally valid checkpoints older than the anchor -- except one a
//     reader has pinned (checkpoint_pin.h: eval, sample, export, ckpt of a live run), which is
//     left for the first retention after its readers are done (waited for as `wait`
//     says first: at a run's end no later retention comes). Checkpoints newer
//     than the anchor (they failed verification) and ones that fail even the structural check
//     are left alone for a person to look at: retention bounds disk use, it does not destroy
//     evidence. The anchor is never deleted.
//   - scratch directories (step_*.tmp) of steps up to the anchor's are removed: a save of a later
//     step may still be in flight on another rank and is left alone.
// Deletion renames step_N to step_N.del.tmp first (one atomic step: a crash mid-way leaves
// scratch, never a half-deleted checkpoint that looks committed), then removes the files, the
// directory, and fsyncs checkpoints/.
//
// Call it on one rank (rank 0) after a commit; never concurrently with another apply_retention
// or a commit in the same run directory. Blocks; throws CheckpointError (keep < 1, I/O errors).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_paths.h"  // kBestLink

namespace rm {

// How long removals wait for the readers of a checkpoint (checkpoint_pin.h): for all the
// checkpoints of one call together, said on stdout when it begins.
struct ReaderWait {
  std::chrono::milliseconds limit{0};
  // Asked as it waits: true ends the wait at once (a stop signal came, and the save that stops the
  // run must not wait on a reader). Null: never.
  std::function<bool()> cut_short;
};

// Returns the paths removed (checkpoints and scratch directories). `wait`: how long checkpoints
// due for removal that readers pin are waited for before they are left to a later retention --
// none but at a run's last save, after which no retention comes.
std::vector<std::string> apply_retention(const std::string& run_dir, int keep,
                                         int64_t keep_every = 0, bool keep_best = false,
                                         const ReaderWait& wait = {}, int64_t read_back_step = -1);

// Removes the committed checkpoints RUN_DIR/checkpoints/step_N at `ckpt_dirs` the way retention
// does (each renamed away, then emptied: a crash leaves scratch, never a half-removed checkpoint
// that looks committed), for a --from resume dropping the line it leaves. Their readers' pins are
// waited for as `wait` says; past that each is removed all the same, its reader failing (said on
// stdout). Throws CheckpointError for a directory not named step_N (before removing any),
// IoError where a removal fails.
void remove_checkpoints_of_run(const std::vector<std::string>& ckpt_dirs, const ReaderWait& wait);

// Points RUN_DIR/checkpoints/best at the best of the run's checkpoints that verify structurally,
// as retention chooses it (keep_best), after checkpoints were removed other than by retention;
// removes a link that leads nowhere, or any with keep_best off. Returns the best's directory
// name, "" for none.
std::string relink_best_checkpoint(const std::string& run_dir, bool keep_best);

}  // namespace rm
