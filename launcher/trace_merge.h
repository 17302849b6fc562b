// `ringmaster trace RUN_DIR`: one Chrome trace of a run from its ranks' files
// (RUN_DIR/trace/rank-K.json, observe/trace_recorder.h), with one process track per rank, for
// Perfetto (ui.perfetto.dev: "Open trace file") or chrome://tracing ("Load").
//
// The ranks' timestamps already share time zero (a barrier at the start of training), so merging
// is concatenation: each file's events keep their pid (the rank). The ranks of the newest
// attempt are merged: those whose origin_utc and rank count match rank 0's file (or, without
// rank 0, the newest file's); files a previous attempt left (another rank count, an older
// start) are skipped, and so are ranks missing from the newest attempt -- each named in
// `notes`.
#pragma once

#include <string>
#include <vector>

namespace rm {

struct MergedTrace {
  std::string json;                // the merged trace file's content
  int ranks = 0;                   // rank files merged
  size_t events = 0;               // trace events in them
  std::vector<std::string> notes;  // "rank 3: no trace file (...)", skipped files
};

// Throws std::runtime_error naming the directory or the file and what is wrong: no trace
// directory or no rank files, a file that is not a rank trace (unparsable, no traceEvents, a
// rank that does not match its name).
MergedTrace merge_rank_traces(const std::string& run_dir);

}  // namespace rm
