// Test hook: makes one rank misbehave at a chosen step so that tests can check that the others
// fail fast and loudly instead of hanging. Driven by the environment variable
//   RM_TEST_FAULT=KIND:RANK:STEP     KIND = stop (SIGSTOP itself), kill (SIGKILL itself),
//                                    sleep (sleep 3600 s)
// e.g. RM_TEST_FAULT=stop:1:3 stops rank 1 at the start of step 3 (1-based). Unset: no effect,
// at the cost of one comparison per step.
#pragma once

#include <cstdint>

namespace rm {

void maybe_inject_fault(int rank, int64_t step);

}  // namespace rm
