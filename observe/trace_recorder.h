// A rank's timeline in Chrome's trace event format (observability.trace): what a step spent its
// time on, layer by layer, beside the gradient reductions it overlapped and the checkpoint
// stages a background thread ran. One file per rank, RUN_DIR/trace/rank-K.json, written when the
// window of traced steps ends (or when the run ends inside it); `ringmaster trace RUN_DIR`
// (launcher/trace_merge.h) merges them into one file with a track per rank for Perfetto or
// chrome://tracing.
//
// Tracks of a rank (pid = rank):
//   tid 1 "training": nested complete events -- "step N" > its phases ("data", "forward",
//     "backward", "gradient sync", "optimizer", "checkpoint save", ...) > the parameter unit
//     being worked on ("forward block 2", "backward embeddings"). A unit's span opens at the
//     model's first access to the unit and closes at its first access to another unit or at
//     the next phase: so the LM head's matmul and the embedding backward both show under
//     "backward embeddings", whose weights they use.
//   async events, category "comm": each gradient reduction (bucket or ZeRO unit) and each ZeRO-3
//     parameter gather, from its issue to the moment this rank saw it complete.
//   tid 3 "checkpoint writer": the stages of each save (checkpoint_writer.h's phase events),
//     from one stage's start to the next's, the last closed when the save returns.
//
// Clocks: every rank's timestamps count microseconds from the same moment, the exit of a
// barrier at the start of Trainer::run() (see align()), so ranks on different hosts line up to
// within that barrier's skew (microseconds on one host) without comparing their clocks.
//
// Bounds: only steps in [trace_start, trace_start + trace_steps) are recorded, and no span or
// reduction begins once kMaxEvents are recorded (those are counted as dropped, and the file says
// so); what was open then still ends, so every kept event's parent span and every kept async
// begin's end are kept too (at most a few events past the cap: the open spans and reductions).
//
// Cost: off, the trainer holds no recorder and every hook is one null-pointer test. On, each
// event is a lock and a vector append (no I/O until the window ends).
//
// Threading: events may come from the training thread and a checkpoint writer thread; a mutex
// orders them. The phase hook (checkpoint_writer.h) reaches the recorder through a process-wide
// pointer that install() sets and the destructor clears.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "observe/step_progress.h"

namespace rm {

class TraceRecorder final : public PhaseObserver {
 public:
  static constexpr size_t kMaxEvents = 200000;

  // Records steps [first_step, first_step + steps) (1-based) of rank `rank` of `ranks`, to be
  // written to RUN_DIR/trace/rank-K.json (file_name). The file's otherData first_step and
  // last_step are the steps it holds: fewer than the window's where the run resumed inside it or
  // ended inside it.
  TraceRecorder(std::string run_dir, int rank, int ranks, int64_t first_step, int64_t steps);
  ~TraceRecorder() override;
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // "rank-00003.json": the one name a rank's file has (5 digits, more past rank 99999).
  static std::string file_name(int rank);

  // Makes this recorder the one the checkpoint phase hook feeds (one per process).
  void install();
  // Sets time zero: call right after a barrier every rank passes.
  void align();
  // Names the attempt the file belongs to by the wall-clock moment it started, which must be the
  // same on every rank (rank 0's, broadcast): `ringmaster trace` merges the files of one
  // attempt. Without it, each rank's own clock at align() names it.
  void set_attempt(std::chrono::system_clock::time_point start);

  // The training thread, at the start of each step (1-based): opens "step N" when it is in the
  // window; after the window, writes the file (once).
  void begin_step(int64_t step);
  // StepProgress's observer: a new phase of the current step closes the previous phase's span
  // (and the unit span inside it).
  void on_phase(Phase phase, int64_t step) override;
  // The model touched parameter unit `unit` (named `name`, "block 2"): opens its span unless it
  // is the one open.
  void unit(int unit, const std::string& name);
  // A collective was issued / seen complete: async events matched by the returned id (0: not
  // recording, and end() ignores it).
  uint64_t comm_begin(const char* what, int index, size_t bytes);
  void comm_end(uint64_t id);
  // A checkpoint stage begins (any thread); save_done() closes the last one.
  void checkpoint_stage(const char* stage);
  void save_done();
  // Writes the file now if anything was recorded and it was not written yet (end of run()).
  void finish();

  // The file, e.g. RUN_DIR/trace/rank-00001.json. Throws IoError (finish and begin_step catch
  // it and print a warning: a trace must not end a run).
  std::string path() const;

 private:
  struct Event {
    char ph;  // 'X' complete, 'b' / 'e' async begin / end
    int tid;
    double ts, dur;  // microseconds since align()
    std::string name;
    const char* cat;
    uint64_t id;
    int64_t step;
  };
  struct Open {
    bool open = false;
    double ts = 0;
    std::string name;
    int64_t step = 0;
  };

  double now_us() const;
  void push(Event e);                                 // with mu_ held
  bool room();  // with mu_ held: whether a span may begin (below kMaxEvents), else counts a drop
  void close(Open& span, int tid, const char* cat);   // with mu_ held
  void close_step_spans();                            // with mu_ held
  void write_file();                                  // with mu_ held

  const std::string run_dir_;
  const int rank_, ranks_;
  const int64_t first_, end_;  // [first_, end_)
  int64_t first_recorded_ = -1, last_recorded_ = -1;  // the steps begun inside the window
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::string origin_utc_;

  std::mutex mu_;
  bool recording_ = false, written_ = false;
  int64_t step_ = 0;
  Open step_span_, phase_span_, unit_span_, stage_span_;
  int unit_ = -1;
  // Past the cap: the phase and unit that did not open, so that their re-entries (a phase is
  // marked at every unit) count as one dropped event, not one each.
  std::string suppressed_phase_;
  int suppressed_unit_ = -1;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::string> comm_names_;  // async events begun and not yet ended
  size_t dropped_ = 0;
  std::vector<Event> events_;
};

}  // namespace rm
