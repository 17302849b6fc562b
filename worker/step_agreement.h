// What the ranks agree on at the end of every step, in the one collective the step already had
// for its loss: the global loss sum, whether any rank was signalled to stop, and the figures
// that show a straggler and the memory high-water mark.
//
// Each rank contributes four doubles; one all_gather (rank order) brings every rank's four to
// every rank, and each rank derives the same results from the same array in the same order --
// so every rank takes the same decisions (stop, NaN handling) at the same step. The loss is
// summed in rank order; before, an all-reduce summed it in the backend's order (the loss is a
// report and a NaN test, never fed back into training, so this changes no weight).
//
// Busy time is a rank's time from the start of its step to the end of its backward: data,
// forward, backward and whatever issuing of gradient reductions overlapped them. Ranks wait for
// each other in the gradient synchronisation, so their full step times are equal; the busy
// times are where one rank's slowness shows.
#pragma once

#include <cstdint>

#include "collectives/communicator.h"

namespace rm {

struct RankContribution {
  double loss_sum = 0;
  bool stop = false;    // this rank received a stop signal
  double busy_ms = 0;
  double peak_rss_mib = 0;
};

struct StepAgreement {
  double loss_sum = 0;
  bool stop = false;  // some rank received a stop signal
  double busy_ms_max = 0, busy_ms_min = 0;
  int slowest_rank = 0;  // the lowest rank with busy_ms_max
  double peak_rss_mib = 0;  // the largest over the ranks
};

// Collective over comm (host memory, doubles); times out like any operation of comm.
StepAgreement agree_on_step(Communicator& comm, const RankContribution& mine);

// This process's peak resident set so far (getrusage), in MiB.
double peak_rss_mib();

}  // namespace rm
