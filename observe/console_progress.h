// Rank 0's console: a progress line redrawn in place on a terminal, and the permanent lines
// (format_log_line) at every log_every step and evaluation. Anywhere else -- a Slurm log, a
// pipe, a file -- only the permanent lines, as before, so logs stay one line per event.
//
// On a terminal each step replaces the previous progress line ("\r", erase to end of line):
//   step   1234/5000  24.7% | 3m12s elapsed, eta 9m48s | loss 1.8234 | 12345 tok/s | MFU 41%
// ETA: the median step time of the last 20 steps times the steps left (training only:
// evaluations and saves add to it). MFU: GEMM flops per second per rank over the sgemm rate
// this rank measured at the job's own GEMM shapes (gemm_rate.h, as `bench train` defines it;
// attention counted in full, T x T, though the kernel skips masked blocks); left out when
// unknown (0: a GPU backend, which no CPU sgemm rate describes).
//
// Whether rank 0's stdout is a terminal is decided by whoever owns the console: `ringmaster
// run` sets RM_CONSOLE_TTY=1 (or 0) for its ranks, whose stdout is mpirun's pipe; a process
// started otherwise asks isatty(1).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "observe/metrics_log.h"

namespace rm {

inline constexpr const char* kConsoleTtyEnv = "RM_CONSOLE_TTY";

// "42s", "3m07s", "27h46m": a duration as the console and `status` show it.
std::string duration_text(double seconds);

// RM_CONSOLE_TTY=1/0 if set, else isatty(stdout).
bool console_is_terminal();

class ConsoleProgress {
 public:
  // flops_per_step: one rank's GEMM flops per optimizer step; sgemm_flops_per_s: its baseline
  // (0: no MFU); peak_flops_per_s: the rank's cores' measured FMA peak (0: not shown). The line
  // shows "MFU 41% of sgemm, 12% of peak": the first is blind to a slow BLAS, the second is not.
  ConsoleProgress(int64_t total_steps, bool terminal, double flops_per_step,
                  double sgemm_flops_per_s, double peak_flops_per_s = 0);

  // After each step: the permanent line if `permanent`, then (on a terminal) the progress line.
  void step(const StepMetrics& m, bool permanent);
  // Erases the progress line, so that other output starts on a clean line. Idempotent.
  void clear();

  // The progress line of step m (without "\r"); public for tests.
  std::string progress_line(const StepMetrics& m) const;

 private:
  int64_t total_;
  bool terminal_;
  double flops_per_step_, sgemm_rate_, peak_rate_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> recent_ms_;  // the last step times, oldest first (at most 20)
  bool drawn_ = false;             // a progress line is on the screen
};

}  // namespace rm
