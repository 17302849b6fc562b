// What `ringmaster report` knows of a run, read from its files into plain structs:
// RUN_DIR/metrics.jsonl (one row per step), RUN_DIR/events.jsonl (each event, placed on the step
// axis), RUN_DIR/config.yaml (the resolved job, its name and step count).
//
// Every field of a metrics line but `step` is optional, so files written before a field existed
// (comm_wait_ms, data_ms, busy_ms_*, ...) still read; a missing or null value is NaN. Nothing
// here validates a job: a report of an old run must not fail because today's schema changed.
// Not thread-safe per RunData; no shared state.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rm::report {

// One metrics.jsonl line. Floats where the plots need no more: a month-long run of a million
// steps stays near 50 MB.
struct StepRow {
  int64_t step = 0;
  float loss = NAN, lr = NAN, grad_norm = NAN, tokens_per_s = NAN, step_ms = NAN;
  float val_loss = NAN;         // evaluation steps only (NaN on one too, where it was not finite)
  bool evaluated = false;       // the line has a val_loss, finite or not (null)
  float choice_accuracy = NAN;  // evaluation steps of a job with data.choices
  float ckpt_stall_ms = NAN, comm_wait_ms = NAN, data_ms = NAN;
  float busy_ms_max = NAN, busy_ms_min = NAN, peak_rss_mib = NAN;
};

// The parts of a step's time, stacked in this order; they sum to step_ms. A missing field
// counts 0; compute is what is left, never below 0.
struct StepTimeParts {
  double compute = 0, comm_wait = 0, data = 0, ckpt_stall = 0;
};
StepTimeParts step_time_parts(const StepRow& row);

struct RunEvent {
  std::string time;             // as written: UTC ISO-8601, which sorts as text
  std::string kind;             // "event"
  std::optional<int64_t> step;  // the step the event names ("step", or "from_step" of started)
  // Where the event is drawn: its step, or for an event without one (restart, requeue, the
  // Slurm script's signal/failed, ...) the step of the next event in time that has one (a
  // restart is drawn where the run started again), else the run's last step. -1: not drawn.
  int64_t plot_step = -1;
  bool placed_by_time = false;
  std::string details;  // the other fields, as compact JSON, cut to 500 bytes
};

// The events of events.jsonl, in time order (ties in file order), placed; last_step is where an
// event with nothing after it goes.
std::vector<RunEvent> place_events(const std::vector<nlohmann::json>& lines, int64_t last_step);

// Facts of the header. Strings are "" when unknown.
struct RunFacts {
  std::string name;                    // config.yaml's name, else the directory's name
  std::optional<int64_t> total_steps;  // config.yaml's train.steps
  std::string config_text;             // config.yaml as written ("" when missing)
  std::string config_problem;          // why config.yaml was not used, if so
  // From the first and the last `started` event (equal when the run started once).
  nlohmann::json first_start, last_start;
  int starts = 0, restarts = 0;  // started events; restart + requeue events
};

struct RunData {
  std::string dir;    // as given on the command line
  std::string label;  // the name, made unique among the report's runs by the caller
  std::string color;  // CSS colour of the run in every plot, chosen by the caller
  RunFacts facts;
  std::vector<StepRow> rows;  // by step, each step once
  std::vector<RunEvent> events;
  bool has_comm_wait = false, has_data = false, has_busy = false, has_rss = false;
  bool has_choices = false;  // a choice_accuracy on some line

  int64_t last_step() const { return rows.empty() ? 0 : rows.back().step; }
};

// Reads a run directory. Throws IoError "DIR: not a run directory (...)" when DIR is not a
// directory or holds no metrics.jsonl, and IoError for unreadable files; a torn or unparsable
// line is skipped, as every reader of these files does.
RunData read_run(const std::string& dir);

}  // namespace rm::report
