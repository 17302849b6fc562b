// finished_runs_end: the end weights.bin holds, as the run's events say it.
#include "worker/finished_run.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace rm {
namespace {

// Under Slurm, the batch script appends its own "finished" event (launcher/slurm_script.cc,
// without a step) after rank 0's, which has the step: the step is rank 0's, not unknown. Before,
// the script's event stopped the search, so every run that ended under Slurm had no known end
// and an earlier end's checkpoint passed for it (judge_finished_run).
TEST(FinishedRunsEnd, IsRankZerosStepPastTheBatchScriptsEvent) {
  TempDir dir;
  dir.write("weights.bin", "w");
  dir.write("events.jsonl",
            "{\"event\":\"finished\",\"step\":8}\n"
            "{\"event\":\"resumed\",\"step\":8}\n"
            "{\"event\":\"finished\",\"step\":16}\n"
            "{\"time\": \"2026-12-03T07:00:00.000Z\", \"event\": \"finished\", \"reason\": \"\", "
            "\"exit_code\": 0}\n");
  EXPECT_EQ(finished_runs_end(dir.path()), 16);
}

TEST(FinishedRunsEnd, IsUnknownWithoutAStepOrWithoutWeights) {
  TempDir dir;
  dir.write("events.jsonl", "{\"event\":\"finished\",\"step\":8}\n");
  EXPECT_EQ(finished_runs_end(dir.path()), std::nullopt);  // no weights.bin: no end
  dir.write("weights.bin", "w");
  EXPECT_EQ(finished_runs_end(dir.path()), 8);
  dir.write("events.jsonl", "{\"event\":\"finished\"}\n{\"event\":\"started\"}\n");
  EXPECT_EQ(finished_runs_end(dir.path()), std::nullopt);
}

}  // namespace
}  // namespace rm
