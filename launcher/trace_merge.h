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

#include <cstdint>
#include <string>
#include <vector>

namespace rm {

class AtomicFileWriter;

// A rank file of the trace, as its otherData describes it.
struct TraceRankFile {
  std::string path;
  int rank = -1;
  int ranks = 0;
  std::string origin;  // origin_utc: its attempt's start
  int64_t first_step = 0, last_step = 0;
  int64_t dropped = 0;  // spans the rank dropped past its recorder's limit (a note says so)
};

struct TraceMergePlan {
  std::vector<TraceRankFile> merged;  // of the attempt merged, by rank
  TraceRankFile lead;                 // rank 0's, else the newest start's
  std::vector<std::string> notes;     // "rank 3: no trace file (...)", skipped files
};

struct MergedTrace {
  int ranks = 0;                   // rank files merged
  size_t events = 0;               // trace events in them
  std::vector<std::string> notes;  // the plan's
};

// Reads each rank file once, holding one rank's events at a time, and chooses what to merge.
// Throws std::runtime_error naming the directory or the file and what is wrong: no trace
// directory or no rank files, a file that is not a rank trace (unparsable, no traceEvents, a
// rank that does not match its name).
TraceMergePlan plan_trace_merge(const std::string& run_dir);

// Appends the merged trace file's content to `out` (the caller commits it), reading the planned
// files again, one at a time: the merge is never whole in memory (two ranks' 142 MB windows took
// 3.5 GB held together). Throws std::runtime_error for a file that changed since the plan or no
// longer reads (then abandon `out`), IoError from `out`.
MergedTrace write_merged_trace(const TraceMergePlan& plan, const std::string& run_dir,
                               AtomicFileWriter& out);

}  // namespace rm
