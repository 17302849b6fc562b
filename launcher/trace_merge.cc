#include "launcher/trace_merge.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/json_guard.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "observe/trace_recorder.h"

namespace rm {
namespace {

using nlohmann::json;

// A trace window is bounded (trace_recorder.h: 200000 events, ~200 bytes each), so a file far
// larger than that is not one of ours.
constexpr uint64_t kMaxRankFileBytes = uint64_t{256} << 20;
constexpr size_t kMaxRankFileValues = size_t{8} << 20;
// More ranks than any job of ours has: a larger otherData.ranks is not one of our files (and
// would have the merge name millions of missing ranks).
constexpr int64_t kMaxRanks = int64_t{1} << 20;

struct RankFile {
  std::string path;
  json doc;
  int rank = -1;
  int ranks = 0;
  std::string origin;
  int64_t first_step = 0, last_step = 0;
  int64_t dropped = 0;  // otherData.dropped_events: spans past the recorder's limit
};

// "rank-00012.json" -> 12, else -1.
int rank_of_name(const std::string& name) {
  const std::string prefix = "rank-", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

// otherData's integer `key` of the file at `path`, or `absent` when it has none; a value of
// another type is refused naming the file and the key (not nlohmann's type_error, which names
// neither).
int64_t int_field(const json& other, const char* key, int64_t absent, const std::string& path) {
  const auto it = other.find(key);
  if (it == other.end()) return absent;
  if (!it->is_number_integer()) {
    throw std::runtime_error(path + ": its otherData." + key + " is " + it->dump() +
                             ", not a whole number");
  }
  return it->get<int64_t>();
}

RankFile read_rank_file(const std::string& path, int rank) {
  RankFile f;
  f.path = path;
  const std::string text = io::read_file(path, kMaxRankFileBytes);
  // Before nlohmann builds a tree: a rank's trace nests five levels, and a window of 200000
  // events holds ~3 million values (json_guard.h: deeper nesting crashes nlohmann's recursion,
  // more values only grow the tree).
  if (const std::string shape = check_json_shape(text, 32, kMaxRankFileValues); !shape.empty()) {
    throw std::runtime_error(path + ": not a rank trace of ours (" + shape + ")");
  }
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array() ||
      !doc.contains("otherData") || !doc["otherData"].is_object()) {
    throw std::runtime_error(path + ": not a rank trace (expected a JSON object with "
                             "traceEvents and otherData, as observability.trace writes)");
  }
  const json& other = doc["otherData"];
  if (int_field(other, "rank", -1, path) != rank) {
    throw std::runtime_error(path + ": its otherData.rank is " + other.value("rank", json()).dump() +
                             ", not " + std::to_string(rank) + " as its name says");
  }
  const int64_t ranks = int_field(other, "ranks", 0, path);
  if (ranks <= rank || ranks > kMaxRanks) {
    throw std::runtime_error(path + ": its otherData.ranks is " + std::to_string(ranks) +
                             ": for rank " + std::to_string(rank) + " it must be from " +
                             std::to_string(rank + 1) + " to " + std::to_string(kMaxRanks));
  }
  f.first_step = int_field(other, "first_step", 0, path);
  f.last_step = int_field(other, "last_step", 0, path);
  // Bounded so that the sum over kMaxRanks files cannot overflow (a damaged file's INT64_MAX).
  f.dropped =
      std::clamp<int64_t>(int_field(other, "dropped_events", 0, path), 0, INT64_MAX / kMaxRanks);
  const auto origin = other.find("origin_utc");
  if (origin != other.end() && !origin->is_string()) {
    throw std::runtime_error(path + ": its otherData.origin_utc is " + origin->dump() +
                             ", not a string");
  }
  for (const json& e : doc["traceEvents"]) {
    if (!e.is_object() || (e.contains("ph") && !e["ph"].is_string())) {
      throw std::runtime_error(path + ": an event of its traceEvents is " + e.dump().substr(0, 80) +
                               ", not an object with a string \"ph\" (a Chrome trace event)");
    }
  }
  f.rank = rank;
  f.ranks = static_cast<int>(ranks);
  f.origin = origin != other.end() ? origin->get<std::string>() : "";
  f.doc = std::move(doc);
  return f;
}

}  // namespace

TraceMergePlan plan_trace_merge(const std::string& run_dir) {
  const std::string dir = io::join(run_dir, "trace");
  if (!io::is_directory(run_dir)) throw std::runtime_error(run_dir + ": no such directory");
  if (io::exists(dir) && !io::is_directory(dir)) {
    throw std::runtime_error(dir +
                             ": not a directory (a run's trace is a directory of one file "
                             "per rank; this is something else, not written by the run)");
  }
  if (!io::is_directory(dir)) {
    throw std::runtime_error(dir + ": no trace directory (the run did not record a trace: set "
                             "observability.trace: true in the job and run it)");
  }
  std::map<int, TraceRankFile> files;
  std::vector<std::string> odd_names;
  for (const std::string& name : io::list_dir(dir)) {
    const int rank = rank_of_name(name);
    if (rank < 0) continue;
    // rank-1.json beside rank-00001.json would be one rank twice: only the name a rank writes.
    if (name != TraceRecorder::file_name(rank)) {
      odd_names.push_back(io::join(dir, name) + ": skipped, not a name a rank writes (rank " +
                          std::to_string(rank) + "'s is " + TraceRecorder::file_name(rank) + ")");
      continue;
    }
    // Read again when written: a rank's tree is ~10x its file, and only one is held at a time.
    const RankFile f = read_rank_file(io::join(dir, name), rank);
    files.emplace(rank, TraceRankFile{f.path, f.rank, f.ranks, f.origin, f.first_step, f.last_step,
                                      f.dropped});
  }
  if (files.empty()) {
    throw std::runtime_error(dir +
                             ": no rank-K.json files (a trace is written when the window "
                             "of observability.trace_steps steps from trace_start ends, or when "
                             "training ends inside it)" +
                             (odd_names.empty() ? "" : "; " + odd_names.front()));
  }
  // The attempt to merge: rank 0's, else the newest start among the files.
  TraceMergePlan plan;
  plan.notes = odd_names;
  const TraceRankFile* lead = &files.begin()->second;
  if (files.count(0) == 0) {
    for (const auto& [rank, f] : files) {
      if (f.origin > lead->origin) lead = &f;
    }
  }
  plan.lead = *lead;
  for (auto& [rank, f] : files) {
    if (f.origin != lead->origin || f.ranks != lead->ranks) {
      plan.notes.push_back(f.path + ": skipped, from another attempt (started " + f.origin +
                           " on " + std::to_string(f.ranks) + " ranks; merging the one started " +
                           lead->origin + " on " + std::to_string(lead->ranks) + ")");
      continue;
    }
    plan.merged.push_back(f);
    if (f.dropped > 0) {
      plan.notes.push_back("rank " + std::to_string(rank) + ": " + std::to_string(f.dropped) +
                           " spans dropped, past the " + std::to_string(TraceRecorder::kMaxEvents) +
                           " events a rank records in a window: the end of its window is "
                           "missing (lower observability.trace_steps)");
    }
  }
  // One note for the ranks without a file, naming the first few.
  constexpr int kNamed = 8;
  std::string missing;
  int missing_count = 0;
  for (int r = 0; r < lead->ranks; ++r) {
    const auto it = files.find(r);
    if (it == files.end() || it->second.origin != lead->origin) {
      if (missing_count++ < kNamed) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (missing_count > 0) {
    plan.notes.push_back(
        std::string(missing_count == 1 ? "rank " : "ranks ") + missing +
        (missing_count > kNamed ? " and " + std::to_string(missing_count - kNamed) + " more" : "") +
        ": no trace file (the rank ended before its window did)");
  }
  return plan;
}

MergedTrace write_merged_trace(const TraceMergePlan& plan, const std::string& run_dir,
                               AtomicFileWriter& out) {
  MergedTrace result;
  result.notes = plan.notes;
  // The ranks' events one file at a time, each written as it is dumped: the merged trace is
  // never whole in memory, nor more than one rank's tree.
  constexpr size_t kFlushBytes = size_t{4} << 20;
  std::string text = "{\"traceEvents\":[";
  bool first = true;
  for (const TraceRankFile& planned : plan.merged) {
    const RankFile f = read_rank_file(planned.path, planned.rank);
    if (f.origin != planned.origin || f.ranks != planned.ranks) {
      throw std::runtime_error(f.path +
                               ": changed while the trace was merged (another run "
                               "writing its trace?); merge again once it is done");
    }
    for (const json& e : f.doc["traceEvents"]) {
      text += first ? "" : ",";
      first = false;
      text += e.dump(-1, ' ', false, json::error_handler_t::replace);
      result.events += e.value("ph", "") != "M" ? 1 : 0;
      if (text.size() >= kFlushBytes) {
        out.append(text.data(), text.size());
        text.clear();
      }
    }
    ++result.ranks;
  }
  int64_t dropped = 0;
  for (const TraceRankFile& f : plan.merged) dropped += f.dropped;
  const json other = {{"run_dir", run_dir},
                      {"ranks", plan.lead.ranks},
                      {"dropped_events", dropped},
                      {"origin_utc", plan.lead.origin},
                      {"first_step", plan.lead.first_step},
                      {"last_step", plan.lead.last_step}};
  // RUN_DIR as given, which may be no UTF-8 (a Latin-1 name): U+FFFD in its place, not a throw.
  text += "],\"displayTimeUnit\":\"ms\",\"otherData\":" +
          other.dump(-1, ' ', false, json::error_handler_t::replace) + "}";
  out.append(text.data(), text.size());
  return result;
}

}  // namespace rm
