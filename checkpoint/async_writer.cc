#include "checkpoint/async_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/retention.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {

AsyncCheckpointWriter::AsyncCheckpointWriter(Mode mode) : mode_(mode) {
  if (mode_ == Mode::kAsync) thread_ = std::thread([this] { thread_main(); });
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !has_job_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      std::cerr << "[checkpoint] background save of step " << job_.step
                << " failed (never waited for): " << e.what() << std::endl;
    } catch (...) {
      std::cerr << "[checkpoint] background save of step " << job_.step << " failed" << std::endl;
    }
  }
}

void AsyncCheckpointWriter::reserve(size_t floats) {
  if (mode_ == Mode::kSync || floats <= staging_floats_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !has_job_; });  // the thread may be reading the old buffer
  grow(floats);
  // Touch every page now so the first save runs at memcpy speed, not page-fault speed.
  std::memset(staging_.get(), 0, floats * sizeof(float));
}

void AsyncCheckpointWriter::grow(size_t floats) {
  staging_.reset();  // free before allocating: the peak is one buffer, not two
  staging_floats_ = 0;
  staging_.reset(new float[floats]);  // uninitialised: the copy into it is the first touch
  staging_floats_ = floats;
}

void AsyncCheckpointWriter::wait_idle_and_rethrow(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [this] { return !has_job_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void AsyncCheckpointWriter::save(const SaveRequest& request) {
  if (mode_ == Mode::kSync) {
    if (request.ready) request.ready();
    result_ = run(request);
    return;
  }
  size_t total = 0;
  for (const ShardSlice& s : request.slices) {
    // Refused here as write_shard refuses them in sync mode: staging would read a null pointer.
    if (s.end < s.begin || (s.end > s.begin && s.data == nullptr)) {
      throw CheckpointError(request.run_dir + ": slice of '" + s.buffer +
                            "' has end < begin or no data");
    }
    total += static_cast<size_t>(s.end - s.begin);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    wait_idle_and_rethrow(lock);
  }
  if (total > staging_floats_) grow(total);

  // The thread is idle: job_ and the staging buffer are ours until has_job_ is set. The copy is
  // the thread's first task (thread_main), so that it overlaps the caller's next computation.
  job_ = request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    has_job_ = true;
    staged_ = false;
  }
  cv_.notify_all();
}

void AsyncCheckpointWriter::wait_staged() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return staged_; });
}

void AsyncCheckpointWriter::stage_job() {
  if (job_.ready) job_.ready();  // e.g. a device download into the slices, still in flight
  float* at = staging_.get();
  for (ShardSlice& s : job_.slices) {
    const size_t n = static_cast<size_t>(s.end - s.begin);
    if (n > 0) std::memcpy(at, s.data, n * sizeof(float));
    s.data = at;
    at += n;
  }
}

SaveResult AsyncCheckpointWriter::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  wait_idle_and_rethrow(lock);
  return result_;
}

bool AsyncCheckpointWriter::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !has_job_;
}

namespace {

// " (this rank's shard needs N bytes; M bytes are free on RUN_DIR's filesystem)": what a full
// disk needs to be told. A quota (EDQUOT) is the user's, not the disk's: the free space would
// send them looking for a full disk that is not.
std::string space_note(const SaveRequest& request, int error) {
  uint64_t need = 0;
  for (const ShardSlice& s : request.slices) need += (s.end - s.begin) * sizeof(float);
  if (error == EDQUOT) {
    return " (this rank's shard of step " + std::to_string(request.step) + " needs " +
           std::to_string(need) + " bytes; the disk quota of this user or group on the " +
           "filesystem of " + request.run_dir + " is used up: `quota -s` says how much is left)";
  }
  struct statvfs fs {};
  if (::statvfs(request.run_dir.c_str(), &fs) != 0) return "";
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  return " (this rank's shard of step " + std::to_string(request.step) + " needs " +
         std::to_string(need) + " bytes; " + std::to_string(free) + " bytes are free on the "
         "filesystem of " + request.run_dir + ")";
}

// After a failed save: remove what it wrote, so that a full disk is not kept full by it (the
// rerun must at least be able to start). The committing rank removes the whole step_N.tmp/
// (other ranks' shards in it are useless without its commit), and the scratch of earlier steps,
// which can no longer commit either: a rank that wrote its shard after this rank had given up
// on that step left a step_N.tmp/ (with checkpoint.on_error: continue on a full disk, one a
// failed save, each with a failure marker or a shard in it). The others remove their own
// shard, leave the empty failure marker that stops the committing rank waiting for them
// (collect_shards), and say why now: the error would otherwise surface only at their next
// save, and they may be killed before (blocked in a collective with the committing rank).
// Best effort: the failure being reported matters more than one that cleaning up may hit.
void abandon_save(const SaveRequest& request, const std::string& error) {
  const std::string tmp = checkpoint_tmp_path(request.run_dir, request.step);
  try {
    if (request.commit) {
      remove_incomplete_checkpoints(request.run_dir, request.step);
      return;
    }
    std::fprintf(stderr, "ringmaster: [rank %d] checkpoint save of step %lld failed: %s\n",
                 request.rank, static_cast<long long>(request.step), error.c_str());
    std::fflush(stderr);
    io::unlink_file(io::join(tmp, shard_descriptor_name(request.rank)));
    io::unlink_file(io::join(tmp, shard_file_name(request.rank)));
    io::make_dirs_durable(tmp);  // a save that failed before writing (data never staged) made none
    io::open_write_truncate(io::join(tmp, shard_failure_name(request.rank)));  // the marker
  } catch (const std::exception&) {
  }
}

}  // namespace

void AsyncCheckpointWriter::thread_main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return has_job_ || stop_; });
    if (!has_job_) return;  // stop_ and nothing queued
    lock.unlock();
    SaveResult result;
    std::exception_ptr error;
    try {
      stage_job();
    } catch (const std::exception& e) {
      // The data never arrived: nothing is written, and the other ranks are told (the failure
      // marker), or the committing rank would wait for this shard until collect_timeout_s.
      error = std::current_exception();
      abandon_save(job_, e.what());
    } catch (...) {
      error = std::current_exception();
      abandon_save(job_, "an unknown error as the data was staged");
    }
    lock.lock();
    staged_ = true;
    cv_.notify_all();
    lock.unlock();
    if (!error) {
      try {
        result = run(job_);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error) {
      error_ = error;
    } else {
      result_ = std::move(result);
    }
    has_job_ = false;
    cv_.notify_all();
  }
}

SaveResult AsyncCheckpointWriter::run(const SaveRequest& request) {
  try {
    SaveResult result = write_and_commit(request);
    if (request.on_saved) request.on_saved(result);
    return result;
  } catch (const IoError& e) {
    // The space note only where space ran out: with a permission error ("cannot remove
    // directory: Permission denied") it sent users looking for a full disk.
    const bool full = e.error_code() == ENOSPC || e.error_code() == EDQUOT;
    const std::string error =
        e.what() + (full ? space_note(request, e.error_code()) : std::string());
    abandon_save(request, error);
    throw IoError(error, e.error_code());
  } catch (const std::exception& e) {
    // Not an I/O error (a bad descriptor, a stale manifest): the save still failed, and the
    // others must not wait for it until collect_timeout_s.
    abandon_save(request, e.what());
    throw;
  }
}

SaveResult AsyncCheckpointWriter::write_and_commit(const SaveRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  SaveResult result;
  result.step = request.step;
  const std::string tmp = prepare_checkpoint_dir(request.run_dir, request.step);
  result.shard = write_shard(tmp, request.step, request.rank, request.slices);
  if (request.commit) {
    Manifest manifest = request.manifest;
    if (manifest.step != request.step) {
      throw CheckpointError(tmp + ": manifest is for step " + std::to_string(manifest.step) +
                            ", saving step " + std::to_string(request.step));
    }
    manifest.files = collect_shards(tmp, request.step, request.writers, request.collect_timeout_s);
    result.committed_path = commit_checkpoint(request.run_dir, request.step, manifest);
    for (const ShardFileInfo& f : manifest.files) result.committed_bytes += f.size;
    if (request.keep > 0) {
      // The checkpoint is committed: one that retention cannot remove (made read-only to keep
      // it, a permission) costs disk space, not the save or the run. The caller warns.
      try {
        result.removed =
            apply_retention(request.run_dir, request.keep, request.keep_every, request.keep_best,
                            request.retention_waits_for_readers,
                            // The writers' read-back stands for the anchor's check only where an
                            // older checkpoint stays beside it: a read-back may see the page
                            // cache, and with keep 1 the anchor's check decides whether the only
                            // other copy goes, so it is read from the storage here as before.
                            request.keep >= 2 ? request.step : -1);
      } catch (const IoError& e) {
        result.retention_error = e.what();
      } catch (const CheckpointError& e) {
        result.retention_error = e.what();
      }
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace rm
