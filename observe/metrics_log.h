// Per-step metrics: one JSON object per line in RUN_DIR/metrics.jsonl (flushed every line so a
// crash loses at most the line being written) and the human log line on stdout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/posix_io.h"

namespace rm {

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, step_ms = 0;
  std::optional<double> val_loss;
  std::optional<double> choice_accuracy;  // data.choices, on evaluation steps
  bool skipped = false;   // update skipped (non-finite loss or gradient, on_nan: skip; a spike)
  std::string spike;      // what made the step a spike: "loss", "grad_norm"; empty: none
  bool rollback = false;  // on_nan: rollback asks the trainer to roll back (never logged)
  // Time this step (and the end of the previous one) spent blocked by checkpoint saves; logged
  // when > 0. Async saves block only if their copy outlasts a forward and backward.
  double ckpt_stall_ms = 0;
  // Where the step's time went, as rank 0 saw it: reading batches, and waiting for gradient
  // communication after its backward (what overlap did not hide).
  double data_ms = 0, comm_wait_ms = 0;
  // Over all ranks (step_agreement.h): the slowest and fastest rank's busy time (data, forward,
  // backward: a straggler shows as a spread), which rank was slowest, and the largest peak
  // resident memory of any rank so far.
  double busy_ms_max = 0, busy_ms_min = 0;
  int slowest_rank = 0;
  double peak_rss_mib = 0;
};

class MetricsLog {
 public:
  // Opens path for a run that starts after `steps_done` steps: 0 starts the file afresh; a
  // resumed run keeps the lines of steps 1..steps_done and drops later ones (steps the crashed
  // run logged after its last checkpoint, which the resumed run repeats), so the file holds
  // each step once. Unparsable lines (a crash mid-line) are dropped too. Throws
  // IoError naming the file on failure.
  MetricsLog(const std::string& path, int64_t steps_done);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends the step's line with one write(2): visible at once, durable at the next sync().
  void write(const StepMetrics& m);
  // fsyncs the file: the trainer calls it before each checkpoint save, so a checkpoint that
  // survives a power cut never outlives the metrics lines of its steps.
  void sync();
  // Drops the lines after step `steps_done` (a rollback to that step), as on opening.
  void rewind(int64_t steps_done);

 private:
  std::string path_;
  io::Fd file_;  // O_APPEND, through io/ (so the fault layer sees every line)
};

// "step   50/2000 | loss 2.4512 | lr 1.00e-03 | norm 0.532 | 12345 tok/s | 85.2 ms"
std::string format_log_line(const StepMetrics& m, int64_t total_steps);

}  // namespace rm
