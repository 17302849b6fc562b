#include "launcher/report_data.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_error.h"
#include "testing/temp_dir.h"

namespace rm::report {
namespace {

using nlohmann::json;

std::string error_of(const std::string& dir) {
  try {
    read_run(dir);
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an IoError for " << dir;
  return "";
}

TEST(ReportData, EventsWithoutAStepArePlacedWhereTheRunGoesOnByTime) {
  // Out of order in the file (two writers); a restart and the Slurm script's lines carry no step.
  const std::vector<json> lines = {
      {{"time", "2026-01-01T00:00:05.000Z"}, {"event", "checkpoint_saved"}, {"step", 10}},
      {{"time", "2026-01-01T00:00:01.000Z"}, {"event", "started"}, {"from_step", 0}},
      {{"time", "2026-01-01T00:00:07.000Z"}, {"event", "restart"}, {"exit_code", 137}},
      {{"time", "2026-01-01T00:00:08.000Z"}, {"event", "started"}, {"from_step", 10}},
      {{"time", "2026-01-01T00:00:09.000Z"}, {"event", "signal"}, {"reason", "SIGUSR1"}},
      {{"time", "2026-01-01T00:00:10.000Z"}, {"event", "stop_signal"}, {"step", 17}},
      {{"time", "2026-01-01T00:00:11.000Z"}, {"event", "failed"}, {"reason", "failed"}},
      {{"event", "no time"}, {"step", 3}},
      {{"time", "2026-01-01T00:00:12.000Z"}},  // no event: not one
  };
  const std::vector<RunEvent> e = place_events(lines, 19);
  ASSERT_EQ(e.size(), 8u);
  std::vector<std::string> kinds;
  for (const RunEvent& x : e) kinds.push_back(x.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"no time", "started", "checkpoint_saved", "restart",
                                             "started", "signal", "stop_signal", "failed"}));
  EXPECT_EQ(e[2].plot_step, 10);
  EXPECT_FALSE(e[2].placed_by_time);
  EXPECT_EQ(e[3].plot_step, 10);  // the restart: where the next attempt started
  EXPECT_TRUE(e[3].placed_by_time);
  EXPECT_FALSE(e[3].step.has_value());
  EXPECT_EQ(e[5].plot_step, 17);  // the signal: the step the ranks stopped after
  EXPECT_EQ(e[7].plot_step, 19);  // nothing after it: the run's last step
  EXPECT_EQ(e[3].details, R"({"exit_code":137})");
  EXPECT_EQ(e[2].details, "");
}

TEST(ReportData, StepTimePartsCountMissingFieldsAsZeroAndNeverGoBelowZero) {
  StepRow r;
  r.step_ms = 100;
  StepTimeParts p = step_time_parts(r);
  EXPECT_EQ(p.compute, 100);
  EXPECT_EQ(p.comm_wait + p.data + p.ckpt_stall, 0);
  r.comm_wait_ms = 30, r.data_ms = 5, r.ckpt_stall_ms = 15;
  p = step_time_parts(r);
  EXPECT_EQ(p.compute, 50);
  EXPECT_EQ(p.comm_wait, 30);
  r.ckpt_stall_ms = 500;  // the stall of the previous step's end, counted into this one
  EXPECT_EQ(step_time_parts(r).compute, 0);
}

TEST(ReportData, ARunDirectoryIsReadStepByStepWithOldAndNewFields) {
  TempDir dir;
  dir.write(
      "metrics.jsonl",
      R"({"step":1,"loss":5.5,"lr":0.001,"tokens_per_s":100,"step_ms":20}
{"step":2,"loss":4.0,"lr":0.001,"tokens_per_s":110,"step_ms":21,"val_loss":4.2}
{"step":3,"loss":3.)"  // torn by a crash
      "\n"
      R"({"step":3,"loss":null,"lr":0.001,"step_ms":22,"comm_wait_ms":3,"busy_ms_max":9,"busy_ms_min":7,"choice_accuracy":0.25}
{"step":2,"loss":3.9,"lr":0.001,"tokens_per_s":111,"step_ms":21}
)");
  dir.write("events.jsonl", R"({"time":"2026-01-01T00:00:01.000Z","event":"started","ranks":2}
{"time":"2026-01-01T00:00:02.000Z","event":"restart"}
)");
  dir.write("config.yaml", "name: tiny\ntrain:\n  steps: 40\n");
  const RunData run = read_run(dir.path());
  EXPECT_EQ(run.facts.name, "tiny");
  EXPECT_EQ(run.facts.total_steps, 40);
  ASSERT_EQ(run.rows.size(), 3u);
  EXPECT_EQ(run.rows[1].loss, 3.9f);  // the later line of step 2
  EXPECT_TRUE(std::isnan(run.rows[1].val_loss));
  EXPECT_TRUE(std::isnan(run.rows[2].loss));
  EXPECT_EQ(run.rows[2].busy_ms_max, 9);
  EXPECT_TRUE(run.has_busy);
  EXPECT_EQ(run.rows[2].choice_accuracy, 0.25f);
  EXPECT_TRUE(std::isnan(run.rows[0].choice_accuracy));
  EXPECT_TRUE(run.has_choices);
  EXPECT_TRUE(run.has_comm_wait);
  EXPECT_FALSE(run.has_data);
  EXPECT_EQ(run.last_step(), 3);
  EXPECT_EQ(run.facts.starts, 1);
  EXPECT_EQ(run.facts.restarts, 1);
  EXPECT_EQ(run.facts.last_start["ranks"], 2);
  ASSERT_EQ(run.events.size(), 2u);
  EXPECT_EQ(run.events[1].plot_step, 3);
}

TEST(ReportData, ANameOrAConfigThatCannotBeReadFallsBackToTheDirectory) {
  TempDir dir;
  dir.write("metrics.jsonl", "");
  const RunData bare = read_run(dir.path() + "/");
  EXPECT_EQ(bare.facts.name, std::filesystem::path(dir.path()).filename().string());
  EXPECT_NE(bare.facts.config_problem.find("config.yaml: missing"), std::string::npos);
  EXPECT_TRUE(bare.rows.empty());

  dir.write("config.yaml", std::string("name: x\0\x01", 9));
  const RunData binary = read_run(dir.path());
  EXPECT_EQ(binary.facts.name, std::filesystem::path(dir.path()).filename().string());
  EXPECT_TRUE(binary.facts.config_text.empty());
  EXPECT_FALSE(binary.facts.config_problem.empty());

  dir.write("config.yaml", "name: [unclosed\n");
  const RunData broken = read_run(dir.path());
  EXPECT_EQ(broken.facts.config_text, "name: [unclosed\n");  // shown as written
  EXPECT_FALSE(broken.facts.config_problem.empty());
}

TEST(ReportData, WhatIsNotARunDirectoryIsRefusedByName) {
  TempDir dir;
  EXPECT_EQ(error_of(dir.path()), dir.path() + ": not a run directory (no metrics.jsonl)");
  EXPECT_EQ(error_of(dir.file("nope")),
            dir.file("nope") + ": not a run directory (no such directory)");
  const std::string file = dir.write("file", "x");
  EXPECT_EQ(error_of(file), file + ": not a run directory (not a directory)");
}

}  // namespace
}  // namespace rm::report
