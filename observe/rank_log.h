// RUN_DIR/logs/rank-K.log: everything a rank prints, stdout and stderr, one line at a time, each
// prefixed with the UTC time and the rank:
//   2026-11-23T18:02:11.123Z [rank 1] ringmaster: [rank 1] all_reduce(seq=5, ...) timed out ...
// so that what every rank said survives in one place per rank, whatever the launcher does with
// the console (mpirun and srun interleave it; Slurm keeps one file per job).
//
// How: stdout and stderr become pipes read by a logger child process forked here. A child, not
// a thread, so that a rank killed by SIGKILL or aborting from its watchdog loses nothing it
// wrote: the pipes keep the bytes, and the child writes them out when it reads end-of-file.
// The child ignores SIGINT, SIGTERM, SIGUSR1 and SIGHUP (a Ctrl-C or Slurm's signal to the
// process group must not silence the rank's last words) and exits at end-of-file, that is when
// the rank and everything it started have exited. Since the rank may already run threads (MPI's)
// when this is called, the child uses only async-signal-safe calls (poll, read, write,
// clock_gettime) and no heap.
//
// Console: rank 0 keeps printing both streams on the console; other ranks keep stderr there
// (their errors) and send stdout to the log only. stdout becomes line-buffered.
//
// At that end-of-file the logger also writes RUN_DIR/logs/rank-K.ended with the attempt's token
// (base/rank_end.h), where a supervisor launched the rank: how `ringmaster run` learns that a
// rank on another host has ended. A start removes the marker of an earlier one.
#pragma once

#include <string>

namespace rm {

// Starts the log of this rank; call once per process, before the rank prints what should be
// kept. Throws IoError naming the file if RUN_DIR/logs cannot be created or opened.
void start_rank_log(const std::string& run_dir, int rank);

// Flushes (if `flush`) and closes stdout and stderr and waits until the logger has written
// everything, so that whoever reads the console or the log after this process exits sees all of
// it. Runs at exit() by itself; call it before _exit() (the watchdog does, with flush false: a
// stuck thread may hold stdio's lock). No-op without a log, and after the first call. Nothing
// may be printed afterwards.
void finish_rank_log(bool flush);

}  // namespace rm
