#include "worker/checkpointing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "base/elapsed.h"
#include "base/input_error.h"
#include "base/run_dir.h"
#include "base/stop_signal.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/retention.h"
#include "configs/job_diff.h"
#include "configs/job_loader.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "observe/run_events.h"
#include "observe/trace_recorder.h"
#include "worker/checkpoint_line.h"
#include "worker/finished_run.h"
#include "worker/shared_verification.h"

namespace rm {

void check_checkpoint_matches_model(const Manifest& manifest, const Model& model,
                                    const std::string& ckpt_dir) {
  const auto& specs = model.layout().tensors();
  bool same = manifest.tensors.size() == specs.size();
  for (size_t i = 0; same && i < specs.size(); ++i) {
    same = manifest.tensors[i].name == specs[i].name && manifest.tensors[i].shape == specs[i].shape &&
           manifest.tensors[i].offset == specs[i].offset;
  }
  const BufferInfo* params = manifest.find_buffer("params");
  if (!same || !params || params->count != model.layout().size()) {
    throw CheckpointError(ckpt_dir + "/manifest.json: tensors: do not match the model of this "
                          "job (" + std::to_string(specs.size()) + " tensors, " +
                          std::to_string(model.layout().size()) + " parameters expected)");
  }
}

Checkpointing::Checkpointing(const JobConfig& job, const std::string& resolved_job,
                             const Model& model, ShardedState& state, Communicator& comm)
    : job_(job), resolved_job_(resolved_job), model_(model), state_(state), comm_(comm),
      writer_(job.checkpoint.async ? AsyncCheckpointWriter::Mode::kAsync
                                   : AsyncCheckpointWriter::Mode::kSync) {
  // A save interrupted by a crash leaves step_N.tmp/ behind; it must go before anyone saves.
  // No live run is writing one: this run holds the run directory's lock (base/run_lock.h).
  if (comm.rank() == 0) remove_incomplete_checkpoints(job.run_dir);
  writer_.reserve(state.checkpoint_floats());  // touch the staging memory now, not mid-run
  comm.barrier();
}

Checkpointing::~Checkpointing() {
  try {
    writer_.wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster: checkpoint save failed: %s\n", e.what());
  }
}

void Checkpointing::save(int64_t steps_done, const nlohmann::json& extra_state) {
  if (steps_done == last_saved_) return;
  last_saved_ = steps_done;
  SaveRequest r;
  r.run_dir = job_.run_dir;
  r.step = steps_done;
  r.rank = comm_.rank();
  ShardedState::CheckpointView view = state_.checkpoint_view();
  r.slices = std::move(view.slices);
  r.ready = std::move(view.ready);
  r.commit = comm_.rank() == 0;
  r.writers = comm_.size();
  r.keep = job_.checkpoint.keep;
  r.keep_every = job_.checkpoint.keep_every;
  r.keep_best = job_.checkpoint.keep_best;
  // After the run's last save no retention comes: a checkpoint a reader holds then (eval of the
  // run as it ends) would be kept for good, one more than checkpoint.keep. Waited for a while.
  if (steps_done >= job_.train.steps) r.retention_waits_for_readers = reader_wait();
  if (r.commit) {
    r.manifest = manifest_of(steps_done, state_.optimizer_steps(), comm_.size(), extra_state);
  }
  r.on_saved = [run_dir = job_.run_dir, commit = r.commit, trace = trace_](const SaveResult& s) {
    if (commit) {
      nlohmann::json removed = s.removed;
      nlohmann::json event = {{"step", s.step},
                              {"path", s.committed_path},
                              {"bytes", s.committed_bytes},
                              {"seconds", s.seconds},
                              {"removed", removed}};
      if (!s.retention_error.empty()) {
        std::fprintf(stderr,
                     "ringmaster: warning: %s is saved, but an older checkpoint could not be "
                     "removed (checkpoint.keep); it stays, and training goes on: %s\n",
                     s.committed_path.c_str(), s.retention_error.c_str());
        std::fflush(stderr);
        event["retention_error"] = s.retention_error;
      }
      append_run_event(run_dir, "checkpoint_saved", event);
    }
    if (trace != nullptr) trace->save_done();
  };
  const auto t0 = std::chrono::steady_clock::now();
  or_abort([&] {
    // An asynchronous writer reports the previous save's failure here, before taking this one:
    // under on_error: continue, that one is reported and this one is still handed over. (A
    // synchronous one reports this save's own failure: the next interval tries again.)
    if (!tolerate_io_error([&] { writer_.save(r); }) && job_.checkpoint.async) {
      tolerate_io_error([&] { writer_.save(r); });
    }
  });
  staging_ = true;
  blocked_ms_ += ms_since(t0);
}

Manifest Checkpointing::manifest_of(int64_t steps_done, int64_t optimizer_steps, int world_size,
                                    const nlohmann::json& extra_state) const {
  Manifest m;
  m.step = steps_done;
  m.world_size = world_size;
  m.shard_mode = choice_name(job_.parallel.shard);
  m.job = resolved_job_;
  const uint64_t total = model_.layout().size();
  m.buffers = {{"params", "f32", total}, {"adam_m", "f32", total}, {"adam_v", "f32", total}};
  for (const TensorSpec& t : model_.layout().tensors()) {
    m.tensors.push_back({t.name, "f32", t.shape, t.offset});
  }
  m.state = {{"steps_done", steps_done},
             {"optimizer_steps", optimizer_steps},
             {"global_sample_cursor", steps_done * job_.train.global_batch},
             {"seed", job_.seed}};
  m.state.update(extra_state);
  return m;
}

void Checkpointing::commit_written(int64_t steps_done, int64_t optimizer_steps, int world_size,
                                   const nlohmann::json& extra_state,
                                   const std::vector<ShardFileInfo>& files) {
  writer_.wait();  // no save of this run in flight beside it
  Manifest m = manifest_of(steps_done, optimizer_steps, world_size, extra_state);
  m.files = files;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = commit_checkpoint(job_.run_dir, steps_done, m);
  uint64_t bytes = 0;
  for (const ShardFileInfo& f : files) bytes += f.size;
  append_run_event(job_.run_dir, "checkpoint_saved",
                   {{"step", steps_done}, {"path", path}, {"bytes", bytes},
                    {"seconds", seconds_since(t0)}, {"removed", nlohmann::json::array()}});
}

void Checkpointing::wait() {
  or_abort([&] { tolerate_io_error([&] { writer_.wait(); }); });
}

bool Checkpointing::tolerate_io_error(const std::function<void()>& body) {
  if (job_.checkpoint.on_error != OnSaveError::kContinue) {
    body();
    return true;
  }
  try {
    body();
    return true;
  } catch (const IoError& e) {
    // The writer has already removed what the failed save wrote; older checkpoints stay.
    ++failed_saves_;
    std::fprintf(stderr,
                 "ringmaster: [rank %d] warning: a checkpoint save failed; training goes on and "
                 "the next interval tries again (checkpoint.on_error: continue): %s\n",
                 comm_.rank(), e.what());
    std::fflush(stderr);
    append_run_event(job_.run_dir, "checkpoint_failed",
                     {{"rank", comm_.rank()}, {"error", e.what()}});
    return false;
  }
}

void Checkpointing::or_abort(const std::function<void()>& body) {
  if (comm_.size() == 1) return body();
  try {
    body();
  } catch (const std::exception& e) {
    comm_.abort(std::string("checkpoint save failed: ") + e.what());
  }
}

void Checkpointing::wait_staged() {
  if (!staging_) return;
  staging_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  writer_.wait_staged();
  blocked_ms_ += ms_since(t0);
}

double Checkpointing::take_blocked_ms() {
  const double ms = blocked_ms_;
  blocked_ms_ = 0;
  return ms;
}

ReaderWait Checkpointing::reader_wait() const {
  double limit_s = job_.parallel.timeout_s;
  if (job_.resilience.step_timeout_s > 0) {
    limit_s = std::min(limit_s, job_.resilience.step_timeout_s);
  }
  ReaderWait wait;
  wait.limit =
      std::chrono::milliseconds(static_cast<int64_t>(std::clamp(limit_s / 4, 0.0, 30.0) * 1000));
  // A stop's save, or a stop as the run starts, does not wait on a reader: the scheduler's grace
  // time runs meanwhile.
  wait.cut_short = [] { return stop_signal_received() != 0; };
  return wait;
}

void Checkpointing::drop_newer_checkpoints(int64_t step) {
  // A resume from an older checkpoint (--from) starts a new line from it: the run's checkpoints
  // past it belong to the line it leaves, and the next plain resume would go back to the newest
  // of them (its steps since then missing from metrics.jsonl, its settings in place of this
  // line's). Committed ones go, durably, once every rank has restored (a resume that fails on
  // any rank drops nothing); the line this run trains writes its own.
  //
  // Removed the way retention removes (renamed away first: a crash leaves scratch, never a
  // half-removed checkpoint that looks committed). A reader of one (eval, export, another run's
  // --from) is waited for a while, well inside the collective timeout the other ranks wait under,
  // then overridden: a line the run no longer trains is not worth a stalled start.
  comm_.barrier();
  if (comm_.rank() != 0) return;
  std::vector<std::string> dropped, paths;
  for (const CheckpointInfo& c : list_checkpoints(job_.run_dir, VerifyLevel::kStructure)) {
    if (c.committed && c.step > step) {
      paths.push_back(c.path);
      dropped.push_back("step " + std::to_string(c.step));
    }
  }
  remove_checkpoints_of_run(paths, reader_wait());
  if (dropped.empty()) return;
  std::string list;
  for (size_t i = 0; i < dropped.size(); ++i) list += (i ? ", " : "") + dropped[i];
  std::printf(
      "ringmaster: --from step %lld: removed this run's newer checkpoints (%s), of the "
      "line the run leaves\n",
      static_cast<long long>(step), list.c_str());
  // checkpoints/best may have led to one of them: the best of those left, as retention would.
  try {
    const std::string best = relink_best_checkpoint(job_.run_dir, job_.checkpoint.keep_best);
    if (!best.empty()) std::printf("ringmaster: checkpoints/best -> %s\n", best.c_str());
  } catch (const std::exception& e) {
    std::printf("ringmaster: checkpoints/best not updated: %s\n", e.what());
  }
  std::fflush(stdout);
  append_run_event(job_.run_dir, "checkpoints_dropped", {{"from_step", step}, {"steps", dropped}});
}

bool Checkpointing::line_start_before_finished_end(const std::string& line_start) const {
  if (!io::exists(run_file(job_.run_dir, "weights.bin"))) return false;
  try {
    // At or past train.steps, the start is an end itself: nothing is removed.
    return load_manifest(line_start).step < job_.train.steps;
  } catch (const std::exception&) {
    return true;  // unreadable: its verification would fail anyway; keep weights.bin
  }
}

void Checkpointing::say_how_the_job_differs(const std::string& given) const {
  // Its weights and optimizer state go on under this job: with another seed or global batch, the
  // data order from its step is this job's, not the one it trained on -- said, as a resume in the
  // run directory that wrote it would refuse it (base/run_dir.h).
  try {
    const JobConfig source =
        load_stored_job(load_manifest(given).job, given + "/" + kManifestFileName);
    const std::string d = describe_differences(training_part(source), training_part(job_));
    if (d.empty()) return;
    std::printf(
        "ringmaster: --from %s: written by a job that trained otherwise (%s); it goes on under "
        "this job's settings: from its step on, the data order is this job's\n",
        given.c_str(), d.c_str());
  } catch (const std::exception&) {
    // The checkpoint's job unreadable: the resume has verified the checkpoint, not its job text.
  }
}

int64_t Checkpointing::resume(const std::string& path, const std::string& line_start) {
  // Rank 0 picks the checkpoint and tells the others, and whether it is the one given (path, or
  // line_start) or the run's own. Every byte of each candidate is verified by all the ranks
  // together, each reading its share (worker/shared_verification.h): the others' wait in this
  // collective is the largest share's read, not the whole checkpoint's.
  double choice[2] = {-1, 0};  // step, given
  double& step = choice[0];
  std::string chosen = path;
  std::vector<std::string> skipped;  // "skipped PATH: why", for the log and the event
  // Rank 0: a given checkpoint (--from, or the line's start), pinned before it is verified and
  // until every rank holds its own pin: another run that still trains may remove it (retention)
  // or point its checkpoints/best elsewhere in between. What it resolved to is what every rank
  // reads, the directory verified.
  std::optional<CheckpointPin> given_pin;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t largest_share = 0;  // of the chosen checkpoint's verification
  decide_with_shared_verification(comm_, [&](const CheckpointVerifier& verify) {
    if (chosen.empty()) {
      auto found = find_resume_checkpoint(job_.run_dir, &skipped, verify);  // verified already
      for (const std::string& line : skipped) std::printf("ringmaster: %s\n", line.c_str());
      // The line started from line_start has a checkpoint on the list, but the newest that
      // verifies is older than the line: the line starts from line_start again.
      if (!line_start.empty() &&
          !(found && goes_on_from(load_manifest(found->path).state, line_start))) {
        found.reset();
        // The line ended (weights.bin) and none of its checkpoints verifies: starting from its
        // start again would remove weights.bin, the only copy of that end -- refused, as the
        // same run without --from is (worker/finished_run.h).
        if (line_start_before_finished_end(line_start)) {
          step = kLineEndWithoutCheckpoint;
        } else {
          std::printf("ringmaster: --from %s: %s: starting from it again\n", line_start.c_str(),
                      skipped.empty() ? "the run holds no checkpoint of the line it began"
                                      : "no checkpoint of the run that goes on from it verifies "
                                        "(above, why)");
          chosen = line_start;
        }
      }
      if (found) {
        chosen = found->path;
        step = static_cast<double>(found->step);
        largest_share = found->verify.hashed_bytes;
        if (judge_finished_run(job_, found) == FinishedRun::kEndNewerThanCheckpoint) {
          step = kEndNewerThanCheckpoints;
          choice[1] = static_cast<double>(found->step);  // for the message on every rank
        }
      } else if (chosen.empty() && step == -1 &&
                 judge_finished_run(job_, found) == FinishedRun::kNoCheckpointVerifies) {
        step = kFinishedWithoutCheckpoint;
      }
    }
    if (step == -1 && !chosen.empty()) {  // given (not refused above)
      given_pin = CheckpointPin::take(chosen);
      if (!given_pin) {
        throw CheckpointError(chosen + ": no such directory (removed by its run's retention?)");
      }
      const VerifyResult v = verify(given_pin->path());
      if (!v.ok) throw CheckpointError(chosen + ": does not verify: " + v.error);
      pause_before_reading_for_tests();  // RM_TEST_READ_PAUSE_MS: the pin's tests
      step = static_cast<double>(v.step);
      largest_share = v.hashed_bytes;
      choice[1] = 1;
    }
  });
  if (comm_.rank() == 0) {
    if (step >= 0) {
      std::printf("ringmaster: resuming from %s (step %lld)\n", chosen.c_str(),
                  static_cast<long long>(step));
      if (choice[1] != 0 && !path.empty()) say_how_the_job_differs(chosen);
      std::fflush(stdout);
    }
    // Also when nothing verified: the checkpoints skipped, and why, are what a user wants to see.
    if (step >= 0 || !skipped.empty()) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      append_run_event(job_.run_dir, "resumed",
                       {{"from", step >= 0 ? nlohmann::json(chosen) : nlohmann::json()},
                        {"step", static_cast<int64_t>(std::max(0.0, step))},
                        {"skipped", skipped},
                        // How the choice was verified: by how many ranks, the most one of them
                        // read of the chosen checkpoint, the time all candidates took.
                        {"verify",
                         {{"ranks", comm_.size()},
                          {"largest_share_bytes", largest_share},
                          {"seconds", seconds}}}});
    }
  }
  comm_.broadcast(choice, 2, DType::kFloat64, 0)->wait();
  // The run directory's preparation refuses these first (worker/finished_run.h); here, what
  // changed since (or a --from that the run's line goes on from already).
  if (step == kFinishedWithoutCheckpoint) {
    throw InputError(finished_run_refusal(job_.run_dir, FinishedRun::kNoCheckpointVerifies, 0));
  }
  if (step == kLineEndWithoutCheckpoint) {
    throw InputError(job_.run_dir + ": holds the end (weights.bin) of the line --from " +
                     line_start +
                     " began, and none of that line's checkpoints verifies (above, why): starting "
                     "from it again would remove weights.bin. Move weights.bin out of the "
                     "directory to keep that end and train the line again (the same command), "
                     "or set run_dir to a new directory");
  }
  if (step == kEndNewerThanCheckpoints) {
    throw InputError(finished_run_refusal(job_.run_dir, FinishedRun::kEndNewerThanCheckpoint,
                                          static_cast<int64_t>(choice[1])));
  }
  if (step < 0) return 0;
  const int64_t steps_done = static_cast<int64_t>(step);
  started_from_ = choice[1] != 0 ? (path.empty() ? line_start : path) : std::string();
  std::string source =
      started_from_.empty() ? checkpoint_path(job_.run_dir, steps_done) : started_from_;
  // Every rank reads the directory rank 0 pinned and verified (given_pin, above).
  if (!started_from_.empty()) {
    source = broadcast_string(comm_, given_pin ? given_pin->path() : std::string(), 0);
  }
  const auto pin = CheckpointPin::take(source);
  if (!pin) {
    throw CheckpointError(source +
                          ": no such directory any more (removed by its run's "
                          "retention after it was verified?)");
  }
  if (!started_from_.empty()) comm_.barrier();  // every rank holds its pin: rank 0's may go
  CheckpointReader reader(source);
  resumed_path_ = reader.dir();
  started_from_origin_ = started_from_.empty()
                             ? nlohmann::json()
                             : checkpoint_line_origin(resumed_path_, started_from_);
  const Manifest& m = reader.manifest();
  check_checkpoint_matches_model(m, model_, reader.dir());
  state_.restore(reader, m.state.value("optimizer_steps", steps_done));
  resumed_state_ = m.state;
  last_saved_ = steps_done;
  return steps_done;
}

}  // namespace rm
