// Test hook: makes one rank misbehave at a chosen moment so that tests can check that the others
// fail fast and loudly instead of hanging, and that a crash at any moment of a checkpoint save
// leaves a run that resumes. Driven by the environment variable
//   RM_TEST_FAULT=KIND:RANK:STEP          KIND = stop (SIGSTOP itself), kill (SIGKILL itself),
//                                         ill (SIGILL itself: a binary built for another CPU),
//                                         sleep (sleep 3600 s), at the start of step STEP
//                                         (1-based; 0: at start-up, before the ranks' first
//                                         agreement, worker/startup_agreement.h)
//   RM_TEST_FAULT=savekill:RANK:N[:DELAY_US]
//                                         SIGKILL at the N-th (1-based) checkpoint phase event
//                                         of rank RANK (checkpoint_writer.h's phase hook: shard
//                                         write/fsync/descriptor, commit phases, retention
//                                         deletes), counted across all the saves of this process
//                                         and on whichever thread saves. With DELAY_US > 0 the
//                                         phase goes on and a helper thread kills the process
//                                         DELAY_US microseconds later (so the kill can land in
//                                         the middle of a write or fsync, or after the save), or
//                                         when the process exits, whichever comes first: once
//                                         event N is reached the process never exits normally.
//   RM_TEST_FAULT=throw:RANK:STEP         rank RANK throws a plain std::runtime_error at the start
//                                         of step STEP (1-based): an error of one rank's while
//                                         the others train on (out of memory, a failed kernel)
//   RM_TEST_FAULT=nan:RANK:STEP           the loss of rank RANK at step STEP is NaN, once (the
//                                         step retried after a rollback is left alone)
//   RM_TEST_FAULT=nanweight:RANK:STEP     the first of rank RANK's parameters is NaN from the
//                                         start of step STEP, once: damage only a restore mends
//   RM_TEST_FAULT=slowio:RANK:US          rank RANK sleeps US microseconds at every beat of
//                                         checkpoint I/O (checkpoint/io_progress.h: each chunk
//                                         read or written, each phase event of a save, each
//                                         shard collected), from its first step on: saves (and
//                                         rollback reads) that are slow but alive, for the
//                                         watchdog's tests (worker/watchdog.h)
//   RM_TEST_FAULT=slowstep:RANK:MS        rank RANK sleeps MS milliseconds at the start of every
//                                         step, inside the step's timing: a straggler, for the
//                                         metrics' per-rank spread (step_agreement.h)
//   RM_TEST_FAULT=slowstart:RANK:MS       rank RANK sleeps MS milliseconds once, at start-up
//                                         (step 0's moment, after MPI and the rank's checks):
//                                         ranks slow to start, for stop notices that come then
//   RM_TEST_FAULT=devfail:RANK:0          rank RANK's compute backend fails to start (throws as
//                                         a GPU that cannot be opened does), the other ranks'
//                                         starting: worker/rank_devices.h
//   RM_TEST_FAULT=slowinit:RANK:MS        rank RANK (not 0) sleeps MS milliseconds once, just
//                                         before it opens model.init_from's source, after
//                                         rank 0 has named it: a source run that changes
//                                         while the ranks start
//   RM_TEST_FAULT=memkill:RANK:STEP       SIGKILL in the middle of rank RANK's in-memory save
//                                         (checkpoint.memory_every) of the state after step
//                                         STEP: at its first chunk, copied and hashed, before the
//                                         slot is committed
//   RM_TEST_FAULT=replstop:RANK:STEP      SIGSTOP (replkill: SIGKILL) itself once that save has
//   RM_TEST_FAULT=replkill:RANK:STEP      posted its replica exchange with the other hosts
//                                         (worker/memory_checkpoints.h), before any of it is
//                                         waited for: a rank, or with the host lost after it, a
//                                         host lost mid-replication
//   RM_TEST_FAULT=slowrestore:RANK:MS     rank RANK sleeps MS milliseconds once, after the ranks
//                                         have agreed on an in-memory step to resume from and
//                                         before it restores it: a slot damaged meanwhile
// Several faults: a comma-separated list, e.g. nan:0:7,kill:0:11 (at most one savekill and
// one slowio).
// Faults strike only the first attempt of a run, unless a fault ends in @ATTEMPT: the attempt
// is RM_RESTART_COUNT (set by the supervisor of `ringmaster run`) or SLURM_RESTART_COUNT (a
// requeued Slurm job), 0 when neither is set; kill:1:9@1 kills rank 1 at step 9 of the first
// restart. When RM_START_RETRY (the batch script starting ranks again that died starting) is
// other than 0, none at 0 strikes (start-up) and the later ones still do (no step or save of the
// attempt had run).
// e.g. RM_TEST_FAULT=stop:1:3 stops rank 1 at the start of step 3; RM_TEST_FAULT=savekill:0:5
// kills rank 0 as its 5th phase event begins. Each fault prints one line to stderr, starting
// "ringmaster: [rank R] RM_TEST_FAULT: ", as it strikes.
//
// Unset: no effect, at the cost of one comparison per step and no phase hook. The value is
// given once, by install_fault_injection (worker/test_hooks.h: at the start of the process),
// and parsed at the first step; a malformed value is reported on stderr and ignored.
#pragma once

#include <cstdint>

namespace rm {

// Sets the faults of this process: RM_TEST_FAULT's value (null: none). Before the first step.
void install_fault_injection(const char* spec);

// Called by every rank at the start of each step (1-based), before any save of the process.
// The first call installs the savekill phase hook and the slowio I/O hook, when a fault asks for
// one on this rank.
void maybe_inject_fault(int rank, int64_t step);

// Called by an in-memory save of the state after `step` steps: before it copies
// (replica_posted false: a memkill arms the kill at its first chunk) and once it has posted its
// replica exchange (true: replstop, replkill).
void maybe_fault_in_memory_save(int rank, int64_t step, bool replica_posted);

// Called by a rank other than 0 just before it opens model.init_from's source: a slowinit
// fault's sleep.
void maybe_delay_initial_weights(int rank);

// Called by every rank as it starts restoring in-memory step `step` (after the agreement): a
// slowrestore fault's sleep.
void maybe_delay_memory_restore(int rank, int64_t step);

// Called by every rank just before it makes its compute backend: a devfail fault's throw.
void maybe_fail_compute_start(int rank);

// True once, when a nan fault names this rank and step (1-based): the trainer then makes its
// loss NaN.
bool fault_poisons_loss(int rank, int64_t step);
// Whether a nanweight fault says this rank's parameters are poisoned at `step`; once.
bool fault_poisons_weights(int rank, int64_t step);

}  // namespace rm
