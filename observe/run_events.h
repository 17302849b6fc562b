// RUN_DIR/events.jsonl: what happened to a run, one JSON object per line, for `ringmaster
// status` and for people: {"time": "2026-11-23T18:02:11.123Z", "event": "restart", ...}.
//
// Writers: `ringmaster submit` (submitted), the supervisor of `ringmaster run` (restart), and the
// Slurm batch script (slurm_start, signal, requeue, failed, finished; written by the script
// itself in the same format). Each line is appended with one write(2) to a file opened
// O_APPEND, so lines of concurrent writers never interleave. Losing a line in a crash is
// harmless: nothing resumes from this file (a finished run's resume from in-memory checkpoints
// reads the last "finished" event's step, and without it trusts the disk alone:
// worker/finished_run.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <functional>

#include <nlohmann/json.hpp>

namespace rm {

// Appends {"time": now (UTC), "event": event, ...fields}. Never throws: a run must not fail
// because its event log cannot be written (it says so on stderr instead).
void append_run_event(const std::string& run_dir, const std::string& event,
                      const nlohmann::json& fields = nlohmann::json::object());

// One line of a JSON-lines file (events.jsonl, metrics.jsonl): the value it holds, or a
// discarded one (is_discarded()) when it is not JSON or nests deeper than any line of ours
// (checkpoint/json_guard.h): nlohmann's copy and dump() recurse once per level, and a 200 KB
// line of brackets would crash `status` and `report` that read it.
nlohmann::json parse_json_line(std::string_view line);

// Every line of a JSON-lines file that parses as an object, in file order (none if the file is
// missing); a line torn by a crash is skipped.
std::vector<nlohmann::json> read_json_lines(const std::string& path);

// Each line of a text file, in order, without its newline, passed to `visit` until it returns
// false. Through io/: a FIFO or device at `path` is refused (IoError) instead of read forever,
// and the file is read in 64 KiB blocks, so memory stays bounded however long the file: a line
// over 1 MiB is skipped. A missing file visits nothing.
void for_each_line(const std::string& path, const std::function<bool(const std::string&)>& visit);

// The lines of a JSON-lines file that parse as objects, from the last to the first, each passed
// to `visit` until it returns false. Reads the file backwards in 64 KiB blocks, so memory stays
// bounded however long the file (a month of metrics.jsonl): a line over 1 MiB is skipped. A
// missing file visits nothing; other read errors throw IoError.
void for_each_json_line_backwards(const std::string& path,
                                  const std::function<bool(const nlohmann::json&)>& visit);

// read_json_lines(RUN_DIR/events.jsonl).
std::vector<nlohmann::json> read_run_events(const std::string& run_dir);

// Now as "2026-11-23T18:02:11.123Z".
std::string utc_now_iso8601();
// A given moment, the same way.
std::string utc_iso8601(std::chrono::system_clock::time_point t);

}  // namespace rm
