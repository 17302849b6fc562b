// How `ringmaster run`'s supervisor learns that a rank of the attempt it launched has ended,
// wherever that rank ran: each rank's logger (observe/rank_log.h), once the rank and everything
// it started have exited, writes RUN_DIR/logs/rank-K.ended holding the attempt's token. mpirun
// across hosts waits for every remote daemon after a rank ends the job; one behind a cut link
// never answers, and mpirun would wait for ever. The supervisor sees a rank's end on its own host
// from /proc, but not one on another host -- the only ones there are when the launch host runs
// no rank, or runs them under a daemon -- so it reads these (launcher/child_process.h).
//
// The token names the supervisor (RM_RUN_LOCK's pid and host, base/run_lock.h) and the attempt
// (RM_RESTART_COUNT): a rank of an earlier attempt, or of an earlier run, that ends late (on a
// host cut off, still running) writes a token no later attempt takes for its own.
#pragma once

#include <string>

namespace rm {

// The token of the attempt this process belongs to, from its environment; "" where no supervisor
// launched it (srun, mpirun by hand): then no marker is written, and none is looked for.
std::string rank_end_token();

// RUN_DIR/logs/rank-K.ended.
std::string rank_end_marker_path(const std::string& run_dir, int rank);

// The lowest rank whose marker in RUN_DIR/logs holds `token`, or -1 (none, or token empty).
// Reads only: never throws.
int first_rank_ended(const std::string& run_dir, const std::string& token);

}  // namespace rm
