#include "launcher/report_data.h"

#include <algorithm>
#include <filesystem>

#include "configs/value_parse.h"
#include "configs/yaml_guard.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "observe/run_events.h"

namespace rm::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

float number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<float>() : NAN;
}

double zero_if_missing(float v) {
  return std::isfinite(v) ? std::max(0.0, double{v}) : 0.0;
}

StepRow row_of(const json& j) {
  StepRow r;
  r.step = j["step"].get<int64_t>();
  r.loss = number(j, "loss");
  r.lr = number(j, "lr");
  r.grad_norm = number(j, "grad_norm");
  r.tokens_per_s = number(j, "tokens_per_s");
  r.step_ms = number(j, "step_ms");
  r.val_loss = number(j, "val_loss");
  r.evaluated = j.contains("val_loss");
  r.choice_accuracy = number(j, "choice_accuracy");
  r.ckpt_stall_ms = number(j, "ckpt_stall_ms");
  r.comm_wait_ms = number(j, "comm_wait_ms");
  r.data_ms = number(j, "data_ms");
  r.busy_ms_max = number(j, "busy_ms_max");
  r.busy_ms_min = number(j, "busy_ms_min");
  r.peak_rss_mib = number(j, "peak_rss_mib");
  return r;
}

// Rows in file order, then by step; where a step appears twice (a file no resume has rewritten
// yet), the later line wins, as it does for a resumed run.
std::vector<StepRow> read_metrics(const std::string& path) {
  std::vector<StepRow> rows;
  // Backwards because that reader keeps memory bounded per line whatever the file's size.
  for_each_json_line_backwards(path, [&](const json& j) {
    const auto step = j.find("step");
    if (step != j.end() && step->is_number_integer()) rows.push_back(row_of(j));
    return true;
  });
  std::reverse(rows.begin(), rows.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const StepRow& a, const StepRow& b) { return a.step < b.step; });
  std::vector<StepRow> unique;
  unique.reserve(rows.size());
  for (const StepRow& r : rows) {
    if (!unique.empty() && unique.back().step == r.step) {
      unique.back() = r;
    } else {
      unique.push_back(r);
    }
  }
  return unique;
}

// name and train.steps from config.yaml, read as yaml text only (no schema: an old run's job
// may not validate against today's), behind the same guards as any job file.
void read_config(const std::string& dir, RunFacts& facts) {
  const std::string path = dir + "/config.yaml";
  if (!io::exists(path)) {
    facts.config_problem = path + ": missing";
    return;
  }
  std::string text;
  try {
    text = io::read_file(path, kMaxJobBytes);
  } catch (const IoError& e) {
    facts.config_problem = e.what();
    return;
  }
  if (const auto bad = check_text_encoding(text)) {
    facts.config_problem = path + ": " + bad->message;
    return;  // not text: not shown either
  }
  facts.config_text = text;
  try {
    if (const auto bad = check_yaml_structure(text)) throw std::runtime_error(bad->message);
    const std::vector<YAML::Node> docs = load_all_documents(text);
    if (docs.empty() || !docs[0].IsMap()) throw std::runtime_error("not a YAML mapping");
    const YAML::Node& job = docs[0];
    if (job["name"] && job["name"].IsScalar()) facts.name = job["name"].as<std::string>();
    if (job["train"] && job["train"].IsMap() && job["train"]["steps"] &&
        job["train"]["steps"].IsScalar()) {
      facts.total_steps = job["train"]["steps"].as<int64_t>();
    }
  } catch (const std::exception& e) {
    facts.config_problem = path + ": " + e.what();
  }
}

std::string directory_name(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

StepTimeParts step_time_parts(const StepRow& row) {
  StepTimeParts p;
  p.comm_wait = zero_if_missing(row.comm_wait_ms);
  p.data = zero_if_missing(row.data_ms);
  p.ckpt_stall = zero_if_missing(row.ckpt_stall_ms);
  p.compute = std::max(0.0, zero_if_missing(row.step_ms) - p.comm_wait - p.data - p.ckpt_stall);
  return p;
}

constexpr size_t kShownKind = 60;      // bytes of an event's name, and of its time
constexpr size_t kShownDetails = 500;  // of its other fields as JSON

std::vector<RunEvent> place_events(const std::vector<json>& lines, int64_t last_step) {
  std::vector<RunEvent> events;
  for (const json& j : lines) {
    const auto kind = j.find("event");
    if (kind == j.end() || !kind->is_string()) continue;
    RunEvent e;
    // Each text goes into the page up to six times (the table, a tooltip per plot), escaped:
    // cut, so that a damaged or hostile line cannot make a page of gigabytes.
    e.kind = shown_text(kind->get<std::string>(), '\0', kShownKind);
    const auto time = j.find("time");
    if (time != j.end() && time->is_string()) {
      e.time = shown_text(time->get<std::string>(), '\0', kShownKind);
    }
    const char* step_key = e.kind == "started" ? "from_step" : "step";
    const auto step = j.find(step_key);
    if (step != j.end() && step->is_number_integer()) e.step = step->get<int64_t>();
    json rest = j;
    for (const char* k : {"time", "event", "step"}) rest.erase(k);
    e.details = rest.empty() ? "" : shown_text(rest.dump(), '\0', kShownDetails);
    events.push_back(std::move(e));
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const RunEvent& a, const RunEvent& b) { return a.time < b.time; });
  std::optional<int64_t> next;  // the step of the next event in time that has one
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->step) {
      it->plot_step = *it->step;
      next = it->step;
    } else {
      it->plot_step = next.value_or(last_step);
      it->placed_by_time = true;
    }
  }
  return events;
}

RunData read_run(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw IoError(dir + ": not a run directory (no such directory)");
  if (!fs::is_directory(dir, ec)) throw IoError(dir + ": not a run directory (not a directory)");
  const std::string metrics = dir + "/metrics.jsonl";
  if (!io::exists(metrics)) throw IoError(dir + ": not a run directory (no metrics.jsonl)");

  RunData run;
  run.dir = dir;
  run.rows = read_metrics(metrics);
  for (const StepRow& r : run.rows) {
    run.has_comm_wait |= std::isfinite(r.comm_wait_ms);
    run.has_data |= std::isfinite(r.data_ms);
    run.has_busy |= std::isfinite(r.busy_ms_max) || std::isfinite(r.busy_ms_min);
    run.has_choices |= std::isfinite(r.choice_accuracy);
    run.has_rss |= std::isfinite(r.peak_rss_mib);
  }
  read_config(dir, run.facts);
  if (run.facts.name.empty()) run.facts.name = directory_name(dir);

  // A FIFO in events.jsonl's place would block the stream reader forever: regular files only,
  // and anything else there is said, as `status` says it (before: a report without events).
  const std::string events = dir + "/events.jsonl";
  if (io::exists(events) && !io::is_regular_file(events)) {
    io::Fd fd = io::open_read(events);
    io::regular_file_size(fd.get(), events);  // throws, naming what it is
  }
  const std::vector<json> lines =
      io::is_regular_file(events) ? read_run_events(dir) : std::vector<json>();
  run.events = place_events(lines, run.last_step());
  for (const json& j : lines) {
    const auto it = j.find("event");
    const std::string kind = it != j.end() && it->is_string() ? it->get<std::string>() : "";
    if (kind == "started") {
      if (run.facts.starts++ == 0) run.facts.first_start = j;
      run.facts.last_start = j;
    }
    if (kind == "restart" || kind == "requeue") ++run.facts.restarts;
  }
  run.label = run.facts.name;
  return run;
}

}  // namespace rm::report
