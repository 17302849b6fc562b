#include "observe/trace_recorder.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_writer.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "observe/run_events.h"

namespace rm {
namespace {

constexpr int kTrainingTid = 1;
constexpr int kCheckpointTid = 3;

std::atomic<TraceRecorder*> g_installed{nullptr};

void on_checkpoint_phase(const char* phase) {
  if (TraceRecorder* t = g_installed.load()) t->checkpoint_stage(phase);
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

nlohmann::json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

TraceRecorder::TraceRecorder(std::string run_dir, int rank, int ranks, int64_t first_step,
                             int64_t steps)
    : run_dir_(std::move(run_dir)), rank_(rank), ranks_(ranks), first_(first_step),
      end_(first_step + steps) {
  events_.reserve(4096);
}

TraceRecorder::~TraceRecorder() {
  TraceRecorder* self = this;
  if (g_installed.compare_exchange_strong(self, nullptr)) {
    remove_checkpoint_phase_hook(on_checkpoint_phase);
  }
}

void TraceRecorder::install() {
  g_installed.store(this);
  add_checkpoint_phase_hook(on_checkpoint_phase);
}

void TraceRecorder::align() {
  std::lock_guard<std::mutex> lock(mu_);
  origin_ = std::chrono::steady_clock::now();
  origin_utc_ = utc_now_iso8601();
}

void TraceRecorder::set_attempt(std::chrono::system_clock::time_point start) {
  std::lock_guard<std::mutex> lock(mu_);
  origin_utc_ = utc_iso8601(start);
}

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void TraceRecorder::push(Event e) {
  events_.push_back(std::move(e));
}

bool TraceRecorder::room() {
  if (events_.size() < kMaxEvents) return true;
  ++dropped_;
  return false;
}

void TraceRecorder::close(Open& span, int tid, const char* cat) {
  if (!span.open) return;
  span.open = false;
  push({'X', tid, span.ts, now_us() - span.ts, std::move(span.name), cat, 0, span.step});
}

void TraceRecorder::close_step_spans() {
  close(unit_span_, kTrainingTid, "layer");
  close(phase_span_, kTrainingTid, "phase");
  close(step_span_, kTrainingTid, "step");
  unit_ = suppressed_unit_ = -1;
  suppressed_phase_.clear();
}

void TraceRecorder::begin_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  close_step_spans();
  step_ = step;
  recording_ = step >= first_ && step < end_;
  if (recording_) {
    if (first_recorded_ < 0) first_recorded_ = step;
    last_recorded_ = step;
  }
  if (recording_ && room()) {
    step_span_ = {true, now_us(), "step " + std::to_string(step), step};
  } else if (step >= end_ && !written_ && !events_.empty()) {
    write_file();
  }
}

void TraceRecorder::on_phase(Phase phase, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  // Re-entering the open phase continues it (ShardedState marks backward at every unit).
  if (!recording_ || (phase_span_.open && phase_span_.name == phase_name(phase)) ||
      suppressed_phase_ == phase_name(phase)) {
    return;
  }
  close(unit_span_, kTrainingTid, "layer");
  close(phase_span_, kTrainingTid, "phase");
  unit_ = suppressed_unit_ = -1;
  suppressed_phase_.clear();
  if (room()) {
    phase_span_ = {true, now_us(), phase_name(phase), step};
  } else {
    suppressed_phase_ = phase_name(phase);
  }
}

void TraceRecorder::unit(int unit, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!recording_ || unit == unit_ || unit == suppressed_unit_) return;
  close(unit_span_, kTrainingTid, "layer");
  if (!room()) {
    unit_ = -1;
    suppressed_unit_ = unit;
    return;
  }
  unit_ = unit;
  suppressed_unit_ = -1;
  const std::string phase = phase_span_.open ? phase_span_.name + " " : std::string();
  unit_span_ = {true, now_us(), phase + name, step_};
}

uint64_t TraceRecorder::comm_begin(const char* what, int index, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!recording_ || !room()) return 0;  // 0: its end is not recorded either
  char name[96];
  std::snprintf(name, sizeof name, "%s %d (%.1f KiB)", what, index,
                static_cast<double>(bytes) / 1024.0);
  const uint64_t id = ++next_id_;
  push({'b', kTrainingTid, now_us(), 0, name, "comm", id, step_});
  comm_names_[id] = name;
  return id;
}

void TraceRecorder::comm_end(uint64_t id) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = comm_names_.find(id);
  if (it == comm_names_.end()) return;  // begun before a write that already closed it
  // The end of a reduction begun in the window is kept even if the window has just closed.
  push({'e', kTrainingTid, now_us(), 0, std::move(it->second), "comm", id, step_});
  comm_names_.erase(it);
}

void TraceRecorder::checkpoint_stage(const char* stage) {
  std::lock_guard<std::mutex> lock(mu_);
  close(stage_span_, kCheckpointTid, "checkpoint");
  if (recording_ && room()) stage_span_ = {true, now_us(), stage, step_};
}

void TraceRecorder::save_done() {
  std::lock_guard<std::mutex> lock(mu_);
  close(stage_span_, kCheckpointTid, "checkpoint");
}

void TraceRecorder::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  close_step_spans();
  close(stage_span_, kCheckpointTid, "checkpoint");
  recording_ = false;
  if (!written_ && !events_.empty()) write_file();
}

std::string TraceRecorder::file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.json", rank);
  return name;
}

std::string TraceRecorder::path() const {
  return io::join(io::join(run_dir_, "trace"), file_name(rank_));
}

void TraceRecorder::write_file() {
  written_ = true;  // once, even if it fails: a full disk is not retried every step
  recording_ = false;
  // Spans still open (a checkpoint stage of a save that outlives the window, a reduction the
  // window's last step left in flight) end now.
  close(stage_span_, kCheckpointTid, "checkpoint");
  for (auto& [id, name] : comm_names_) {
    push({'e', kTrainingTid, now_us(), 0, std::move(name), "comm", id, step_});
  }
  comm_names_.clear();
  nlohmann::json events = nlohmann::json::array();
  const std::string host = host_name();
  events.push_back(metadata("process_name", rank_, 0, "rank " + std::to_string(rank_) + " (" +
                                                          host + ")"));
  events.push_back(
      {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank_}, {"args", {{"sort_index", rank_}}}});
  events.push_back(metadata("thread_name", rank_, kTrainingTid, "training"));
  events.push_back(metadata("thread_name", rank_, kCheckpointTid, "checkpoint writer"));
  for (const Event& e : events_) {
    nlohmann::json j = {{"ph", std::string(1, e.ph)}, {"pid", rank_}, {"tid", e.tid},
                        {"ts", e.ts}, {"cat", e.cat}, {"args", {{"step", e.step}}}};
    j["name"] = e.name;
    if (e.ph == 'X') j["dur"] = e.dur;
    if (e.ph != 'X') j["id"] = e.id;
    events.push_back(std::move(j));
  }
  const nlohmann::json file = {{"traceEvents", std::move(events)},
                               {"displayTimeUnit", "ms"},
                               {"otherData",
                                {{"rank", rank_},
                                 {"ranks", ranks_},
                                 {"host", host},
                                 {"origin_utc", origin_utc_},
                                 {"first_step", first_recorded_ >= 0 ? first_recorded_ : first_},
                                 {"last_step", last_recorded_ >= 0 ? last_recorded_ : end_ - 1},
                                 {"dropped_events", dropped_}}}};
  const std::string text = file.dump();
  try {
    io::make_dirs_durable(io::join(run_dir_, "trace"));
    write_file_atomic(path(), text.data(), text.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster: [rank %d] warning: trace not written: %s\n", rank_,
                 e.what());
  }
  events_.clear();
  events_.shrink_to_fit();
}

}  // namespace rm
