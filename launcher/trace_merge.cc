#include "launcher/trace_merge.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/posix_io.h"

namespace rm {
namespace {

using nlohmann::json;

// A trace window is bounded (trace_recorder.h: 200000 events, ~200 bytes each), so a file far
// larger than that is not one of ours.
constexpr uint64_t kMaxRankFileBytes = uint64_t{256} << 20;

struct RankFile {
  std::string path;
  json doc;
  int rank = -1;
  int ranks = 0;
  std::string origin;
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

RankFile read_rank_file(const std::string& path, int rank) {
  RankFile f;
  f.path = path;
  const json doc = json::parse(io::read_file(path, kMaxRankFileBytes), nullptr, false);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array() ||
      !doc.contains("otherData") || !doc["otherData"].is_object()) {
    throw std::runtime_error(path + ": not a rank trace (expected a JSON object with "
                             "traceEvents and otherData, as observability.trace writes)");
  }
  const json& other = doc["otherData"];
  if (other.value("rank", -1) != rank) {
    throw std::runtime_error(path + ": its otherData.rank is " + other.value("rank", json()).dump() +
                             ", not " + std::to_string(rank) + " as its name says");
  }
  f.rank = rank;
  f.ranks = other.value("ranks", 0);
  f.origin = other.value("origin_utc", "");
  f.doc = std::move(doc);
  return f;
}

}  // namespace

MergedTrace merge_rank_traces(const std::string& run_dir) {
  const std::string dir = io::join(run_dir, "trace");
  if (!io::is_directory(dir)) {
    throw std::runtime_error(dir + ": no trace directory (the run did not record a trace: set "
                             "observability.trace: true in the job and run it)");
  }
  std::map<int, RankFile> files;
  for (const std::string& name : io::list_dir(dir)) {
    const int rank = rank_of_name(name);
    if (rank >= 0) files.emplace(rank, read_rank_file(io::join(dir, name), rank));
  }
  if (files.empty()) {
    throw std::runtime_error(dir + ": no rank-K.json files (a trace is written when the window "
                             "of observability.trace_steps steps from trace_start ends, or when "
                             "training ends inside it)");
  }
  // The attempt to merge: rank 0's, else the newest start among the files.
  const RankFile* lead = &files.begin()->second;
  if (files.count(0) == 0) {
    for (const auto& [rank, f] : files) {
      if (f.origin > lead->origin) lead = &f;
    }
  }
  MergedTrace out;
  json events = json::array();
  for (auto& [rank, f] : files) {
    if (f.origin != lead->origin || f.ranks != lead->ranks) {
      out.notes.push_back(f.path + ": skipped, from another attempt (started " + f.origin + " on " +
                          std::to_string(f.ranks) + " ranks; merging the one started " +
                          lead->origin + " on " + std::to_string(lead->ranks) + ")");
      continue;
    }
    for (json& e : f.doc["traceEvents"]) events.push_back(std::move(e));
    ++out.ranks;
  }
  for (int r = 0; r < lead->ranks; ++r) {
    const auto it = files.find(r);
    if (it == files.end() || it->second.origin != lead->origin) {
      out.notes.push_back("rank " + std::to_string(r) +
                          ": no trace file (the rank ended before its window did)");
    }
  }
  for (const json& e : events) out.events += e.value("ph", "") != "M" ? 1 : 0;
  const json merged = {{"traceEvents", std::move(events)},
                       {"displayTimeUnit", "ms"},
                       {"otherData",
                        {{"run_dir", run_dir},
                         {"ranks", lead->ranks},
                         {"origin_utc", lead->origin},
                         {"first_step", lead->doc["otherData"].value("first_step", 0)},
                         {"last_step", lead->doc["otherData"].value("last_step", 0)}}}};
  out.json = merged.dump();
  return out;
}

}  // namespace rm
