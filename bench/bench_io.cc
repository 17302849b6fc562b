#include "bench/bench_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/elapsed.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

// The baselines' write(2)/pread(2) size: large, the plain I/O at its best.
constexpr size_t kChunkBytes = size_t{8} << 20;
constexpr const char* kNames[3] = {"params", "adam_m", "adam_v"};

// Element i of buffer b: a float in +-[1, 2) with 23 pseudo-random mantissa bits (splitmix64).
float pattern(int b, uint64_t i) {
  uint64_t z = i * 3 + static_cast<uint64_t>(b) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint32_t bits = 0x3f800000u | static_cast<uint32_t>(z & 0x807fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Reads `bytes` at `offset` of fd into dst with pread calls of up to kChunkBytes.
void pread_chunks(int fd, char* dst, uint64_t bytes, uint64_t offset, const std::string& path) {
  for (uint64_t done = 0; done < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - done, kChunkBytes));
    io::pread_exact(fd, dst + done, n, offset + done, path);
    done += n;
  }
}

}  // namespace

BenchState::BenchState(uint64_t count) : count_(count) {
  for (int b = 0; b < 3; ++b) {
    data_[b].reset(new float[count]);
    float* p = data_[b].get();
    for (uint64_t i = 0; i < count; ++i) p[i] = pattern(b, i);
  }
}

float* BenchState::buffer(const std::string& name) {
  for (int b = 0; b < 3; ++b) {
    if (name == kNames[b]) return data_[b].get();
  }
  throw CheckpointError("bench: no buffer '" + name + "'");
}

std::vector<ShardSlice> BenchState::slices(int rank, int ranks) const {
  const uint64_t begin = count_ * rank / ranks, end = count_ * (rank + 1) / ranks;
  std::vector<ShardSlice> out;
  for (int b = 0; b < 3; ++b) out.push_back({kNames[b], begin, end, data_[b].get() + begin});
  return out;
}

uint64_t BenchState::shard_floats(int rank, int ranks) const {
  return 3 * (count_ * (rank + 1) / ranks - count_ * rank / ranks);
}

Manifest BenchState::manifest(int64_t step, int ranks) const {
  Manifest m;
  m.step = step;
  m.world_size = ranks;
  m.shard_mode = "bench";
  for (const char* name : kNames) m.buffers.push_back(BufferInfo{name, "f32", count_});
  m.state = {{"steps_done", step}};
  return m;
}

void BenchState::check(const std::string& what) const {
  for (int b = 0; b < 3; ++b) {
    const float* p = data_[b].get();
    for (uint64_t i = 0; i < count_; ++i) {
      const float want = pattern(b, i);
      if (std::memcmp(&p[i], &want, sizeof want) != 0) {
        throw CheckpointError(what + ": read back wrong data: " + kNames[b] + "[" +
                              std::to_string(i) + "] is " + std::to_string(p[i]) + ", wrote " +
                              std::to_string(want));
      }
    }
  }
}

void BenchState::scramble() {
  for (auto& buffer : data_) std::memset(buffer.get(), 0xFF, count_ * sizeof(float));
}

double bench_write_fsync(const std::string& path, const BenchState& state) {
  const auto t0 = Clock::now();
  io::Fd fd = io::open_write_truncate(path);
  for (const ShardSlice& s : state.slices(0, 1)) {
    const char* p = reinterpret_cast<const char*>(s.data);
    for (uint64_t left = (s.end - s.begin) * sizeof(float); left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunkBytes));
      io::write_all(fd.get(), p, n, path);
      p += n;
      left -= n;
    }
  }
  io::fsync_fd(fd.get(), path);
  fd.close_checked(path);
  io::fsync_directory(io::parent_dir(path));
  const double seconds = seconds_since(t0);
  io::unlink_file(path);
  return seconds;
}

double bench_checkpoint_save(const std::string& run_dir, const BenchState& state, int ranks,
                             int64_t step, std::string* ckpt_dir) {
  Manifest m = state.manifest(step, ranks);
  const auto t0 = Clock::now();
  const std::string tmp = prepare_checkpoint_dir(run_dir, step);
  for (int r = 0; r < ranks; ++r)
    m.files.push_back(write_shard(tmp, step, r, state.slices(r, ranks)));
  *ckpt_dir = commit_checkpoint(run_dir, step, m);
  return seconds_since(t0);
}

std::vector<std::unique_ptr<AsyncCheckpointWriter>> make_bench_writers(
    AsyncCheckpointWriter::Mode mode, const BenchState& state, int ranks) {
  std::vector<std::unique_ptr<AsyncCheckpointWriter>> writers;
  for (int r = 0; r < ranks; ++r) {
    writers.push_back(std::make_unique<AsyncCheckpointWriter>(mode));
    writers.back()->reserve(state.shard_floats(r, ranks));
  }
  return writers;
}

WriterSaveTimes bench_writer_save(std::vector<std::unique_ptr<AsyncCheckpointWriter>>& writers,
                                  const std::string& run_dir, const BenchState& state, int64_t step,
                                  double collect_timeout_s) {
  const int ranks = static_cast<int>(writers.size());
  std::vector<SaveRequest> requests(ranks);
  for (int r = 0; r < ranks; ++r) {
    SaveRequest& q = requests[r];
    q.run_dir = run_dir;
    q.step = step;
    q.rank = r;
    q.slices = state.slices(r, ranks);
    q.commit = r == 0;
    q.writers = ranks;
    q.collect_timeout_s = collect_timeout_s;
    if (q.commit) q.manifest = state.manifest(step, ranks);
    // Retention after the commit, as every trainer's save has: its check of the checkpoint just
    // committed is part of a save's cost. keep 2, not 1 (3 is the default): with keep 1 rank 0
    // reads the anchor again itself (async_writer.cc).
    q.keep = 2;
  }
  WriterSaveTimes t;
  const auto t0 = Clock::now();
  for (int r = ranks - 1; r >= 0; --r) writers[r]->save(requests[r]);
  t.blocked = seconds_since(t0);
  for (int r = ranks - 1; r >= 0; --r) writers[r]->wait_staged();
  t.staged = seconds_since(t0);
  for (int r = ranks - 1; r >= 0; --r) writers[r]->wait();
  t.done = seconds_since(t0);
  return t;
}

double drop_from_page_cache(const std::string& path) {
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  if (const int err = ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED)) {
    io::throw_errno(path, "posix_fadvise(DONTNEED) failed", err);
  }
  if (size == 0) return 0;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) io::throw_errno(path, "mmap failed", errno);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int rc = ::mincore(map, size, resident.data());
  const int err = errno;
  ::munmap(map, size);
  if (rc != 0) io::throw_errno(path, "mincore failed", err);
  const size_t in =
      std::count_if(resident.begin(), resident.end(), [](unsigned char v) { return (v & 1) != 0; });
  return static_cast<double>(in) / static_cast<double>(resident.size());
}

double bench_read_plain(const std::string& ckpt_dir, const Manifest& manifest, BenchState& into) {
  const auto t0 = Clock::now();
  for (const ShardFileInfo& f : manifest.files) {
    const std::string path = io::join(ckpt_dir, f.name);
    io::Fd fd = io::open_read(path);
    for (const PieceInfo& p : f.pieces) {
      char* dst = reinterpret_cast<char*>(into.buffer(p.buffer) + p.begin);
      pread_chunks(fd.get(), dst, p.bytes, p.offset, path);
    }
  }
  return seconds_since(t0);
}

double bench_restore(const std::string& ckpt_dir, BenchState& into) {
  const auto t0 = Clock::now();
  CheckpointReader reader(ckpt_dir);
  for (const BufferInfo& b : reader.manifest().buffers) {
    reader.read_range(b.name, 0, b.count, into.buffer(b.name));
  }
  return seconds_since(t0);
}

double bench_verify(const std::string& ckpt_dir, int readers) {
  std::vector<VerifyResult> results(static_cast<size_t>(readers));
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&, r] {
      results[r] = verify_checkpoint(ckpt_dir, VerifyLevel::kChecksums, VerifyShare{r, readers});
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = seconds_since(t0);
  for (const VerifyResult& v : results) {
    if (!v.ok) throw CheckpointError("bench: verification failed: " + v.error);
  }
  return seconds;
}

}  // namespace rm
