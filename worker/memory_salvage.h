// In-memory checkpoints across a change of rank count (resilience.shrink, issue 22). When
// `ringmaster run` restarts a job of N ranks on M != N ranks -- a host lost and the job shrunk
// onto the hosts left -- the segments the N ranks kept (worker/memory_checkpoints.h) are still
// on the hosts left: the own segments of the ranks that ran there, and the replicas they kept of
// the ranks of the host before them in the ring, which covers a lost host's ranks. The M ranks
// cannot restore those slots directly (each holds another range of the state), so this turns
// them into what N ranks would have written to disk: for the newest step that every old rank can
// be restored from, verified, one shard per old rank, written from the slot's bytes as they are
// by a rank that holds it, committed by rank 0 as step_S. The M ranks then resume from it as from
// any checkpoint, resharding N -> M (checkpoint_reader.h), so what they restore is verified
// twice: the slot against its checksum before it is written, the shard when it is read.
//
// Every rank opens every old rank's segment and replica by name on its own host (those of other
// hosts, or gone, are simply not there); a segment of another run, layout or model is never
// opened (the owner keys of memory_checkpoints.h, for N ranks). Afterwards -- used, older than
// the disk, or not enough of them -- the old layout's segments are removed on every host of the
// job, so none is left behind; but not when the disk checkpoint could not be committed, so that
// the next attempt can try again.
//
// Collective over `comm` (the M ranks): every rank calls it at the same point.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "collectives/communicator.h"
#include "configs/job_config.h"

namespace rm {

// The rank count of the layout a shrunk restart comes from, set by the supervisor in the ranks'
// environment (launcher/supervisor.h); 0 when not set.
inline constexpr const char* kShrunkFromRanksEnv = "RM_SHRUNK_FROM_RANKS";
int shrunk_from_ranks();

struct SalvagedStep {
  std::optional<int64_t> step;  // the step committed to disk; nullopt: none
  std::string account;  // for rank 0's start-up line: what was found, or why not used ("":
                        // no segment of the old layout on any host)
  std::string skipped;  // rank 0's slots passed over, and why ("" if none)
};

// Rank 0 commits the checkpoint of `step` whose shard files (one per old rank) are `files`, with
// the optimizer's step count, the batches skipped by rollbacks up to it, and the training data
// old rank 0's slot records (windows and fingerprint, 0: not recorded): the data that step was
// trained on, which the resume from it checks against the data open now.
using CommitSalvaged = std::function<void(
    int64_t step, int64_t optimizer_steps, const std::vector<int64_t>& skipped_batches,
    uint64_t train_windows, uint64_t train_fingerprint, const std::vector<ShardFileInfo>& files)>;

// Salvages the in-memory state of the job's earlier layout of `old_ranks` ranks over a model of
// `total_params` parameters, if it holds a step newer than `newer_than` (the newest disk
// checkpoint). Throws std::runtime_error on every rank, naming what failed, when a shard could
// not be written or the commit failed (the segments are then kept).
SalvagedStep salvage_memory_layout(const JobConfig& job, size_t total_params, int old_ranks,
                                   Communicator& comm, int64_t newer_than,
                                   const CommitSalvaged& commit);

}  // namespace rm
