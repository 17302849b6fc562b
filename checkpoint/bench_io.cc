#include "checkpoint/bench_io.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/posix_io.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<float[]> touched_floats(size_t n) {
  std::unique_ptr<float[]> p(new float[n]);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 1000) * 0.5f;
  return p;
}

}  // namespace

double bench_write_fsync(const std::string& dir, size_t bytes) {
  const size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
  const auto data = touched_floats(n);
  const std::string path = io::join(dir, "bench_write_fsync." + std::to_string(::getpid()));
  const auto t0 = Clock::now();
  io::Fd fd = io::open_write_truncate(path);
  const char* p = reinterpret_cast<const char*>(data.get());
  for (size_t left = bytes; left > 0;) {  // the same 8 MiB calls as write_shard
    const size_t chunk = std::min(left, size_t{8} << 20);
    io::write_all(fd.get(), p, chunk, path);
    p += chunk;
    left -= chunk;
  }
  io::fsync_fd(fd.get(), path);
  fd.close_checked(path);
  fsync_directory(dir);
  const double seconds = since(t0);
  io::unlink_file(path);
  return seconds;
}

double bench_checkpoint_save(const std::string& dir, size_t bytes, int ranks) {
  ranks = std::max(ranks, 1);
  const uint64_t n = bytes / sizeof(float);
  const auto data = touched_floats(n);
  const std::string run_dir = io::join(dir, "bench_ckpt." + std::to_string(::getpid()));
  const int64_t step = 1;
  Manifest m;
  m.step = step;
  m.world_size = ranks;
  m.shard_mode = "bench";
  m.buffers.push_back(BufferInfo{"params", "f32", n});

  const auto t0 = Clock::now();
  const std::string tmp = prepare_checkpoint_dir(run_dir, step);
  for (int r = 0; r < ranks; ++r) {
    const uint64_t b = n * r / ranks, e = n * (r + 1) / ranks;
    m.files.push_back(write_shard(tmp, step, r, {ShardSlice{"params", b, e, data.get() + b}}));
  }
  commit_checkpoint(run_dir, step, m);
  const double seconds = since(t0);
  io::remove_tree(run_dir);
  return seconds;
}

}  // namespace rm
