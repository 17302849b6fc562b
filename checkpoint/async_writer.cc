#include "checkpoint/async_writer.h"

#include <chrono>
#include <cstring>
#include <iostream>

#include "checkpoint/retention.h"

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
    if (s.end < s.begin) {
      throw CheckpointError(request.run_dir + ": slice of '" + s.buffer + "' has end < begin");
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
    } catch (...) {
      error = std::current_exception();  // the data never arrived: nothing is written
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
    if (request.keep > 0) {
      result.removed = apply_retention(request.run_dir, request.keep, request.keep_every);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace rm
