// `ringmaster bench ckpt [--dir D] [--gib G] [--ranks R] [--repeats K]`: checkpoint save, the
// training stall per save and restore, each beside a plain-I/O baseline of the same bytes in the
// same directory, measured in this process. Everything is real files, fsynced, deleted at once.
//
// What is saved: what a trainer saves, G GiB in all of params, adam_m and adam_v (equal float
// buffers, pattern-filled), split over R shards as ZeRO slices them (each shard holds its
// [begin, end) of all three buffers), committed with a manifest.
//
// Each of the K repeats runs every pair baseline-then-subject (A B, A B ...), in this order:
//   1. save throughput: plain write+fsync of the same bytes to one file with 8 MiB write(2)
//      calls (write_shard hashes and writes 256 KiB at a time), then fsync of the directory
//      (bench_write_fsync) -- against a whole checkpoint save: write_shard (which reads its shard
//      back, every checksum) for each of the R shards one after another, then commit_checkpoint
//      (bench_checkpoint_save). Goal: at least 0.8x the
//      plain write's GiB/s.
//   2. restore, of the checkpoint just saved: plain pread(2) of every shard file into the same
//      memory (no checks) against CheckpointReader::read_range of every whole buffer (manifest
//      validated, every piece's XXH64 checked). Cold: every file was dropped from the page cache
//      with posix_fadvise(POSIX_FADV_DONTNEED) (clean after its fsync; mincore confirms), then
//      warm, read again at once. No goal yet. Every read is checked element by element
//      (untimed). Then the verification a resume makes of its choice, cold: one reader of the
//      whole checkpoint (rank 0 alone, as before) against R threads as R ranks, each reading its
//      share (worker/shared_verification.h). No goal: it is a wait the other ranks no longer
//      make, and R readers go faster only where the storage (or the hashing) has room for them.
//   3. training stall: AsyncCheckpointWriter built as the trainer builds it, one per rank, the
//      kAsync ones reserve()d at start-up as worker/checkpointing.cc does, with the trainer's
//      SaveRequests (the rank's slices, rank 0 commits with the manifest). This one process
//      acts as all R ranks in turn (last rank first, so that in kSync mode rank 0, which waits
//      for every shard, comes last): the stall is the time the R save() calls block the caller
//      -- kSync: the whole write and commit; kAsync: handing the slices over -- then, for
//      kAsync, the time until every wait_staged() has returned (the writer threads' copies into
//      staging: the stall of a caller with nothing to overlap them with, the worst case; a
//      trainer overlaps them with its next forward and backward) and until every wait() has
//      returned (committed). Goal: async stall at most 0.1x sync, checked on the worst case.
//      Summing over ranks is the honest comparison for a job: its sync stall is the whole save
//      anyway (rank 0 waits for every shard, the other ranks wait for rank 0 at the next
//      collective), while its ranks make their async copies in parallel, so its async stall is
//      between 1/R of this figure (one rank per node) and all of it (ranks sharing a memory bus
//      that one copying thread saturates, as on a small VM): the ratio printed is an upper bound.
// Reported: medians over the repeats (min and max beside them), GiB/s = bytes / seconds, and
// the ratio of medians to the baseline with the goal it is measured against.
//
// Files: a scratch directory D/bench-ckpt.<pid>/ removed at the end (also after an error, and
// after SIGINT/SIGTERM/SIGUSR1, at the end of the repeat in progress); D itself and any
// parents are created if missing and then removed again if still empty.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/stop_signal.h"
#include "bench/bench_io.h"
#include "bench/bench_memory_snapshot.h"
#include "checkpoint/checkpoint_reader.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "launcher/cmd_common.h"

namespace rm {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kSaveGoal = 0.8;    // checkpoint save GiB/s >= 0.8x plain write+fsync
constexpr double kStallGoal = 0.10;  // async save() stall <= 0.1x sync save() stall

// D, created with its missing parents, and the scratch directory inside it. The destructor
// removes both (errors ignored, after an error); finish() does it reporting errors.
class BenchDir {
 public:
  explicit BenchDir(const std::string& dir) : dir_(dir) {
    if (dir.empty()) throw IoError("bench ckpt: --dir is empty");
    work_ = io::join(dir, "bench-ckpt." + std::to_string(::getpid()));
    try {
      std::string at = dir[0] == '/' ? "/" : "";
      for (size_t i = 0; i < dir.size();) {
        size_t j = dir.find('/', i);
        if (j == std::string::npos) j = dir.size();
        if (j > i) {
          at += (at.empty() || at.back() == '/' ? "" : "/") + dir.substr(i, j - i);
          make(at);
        }
        i = j + 1;
      }
      make(work_);
    } catch (...) {
      remove_created();  // no destructor runs for a constructor that throws
      throw;
    }
  }
  ~BenchDir() {
    if (finished_) return;
    try {
      cleanup();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ringmaster: bench ckpt: could not clean up: %s\n", e.what());
    }
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;

  const std::string& work() const { return work_; }

  // Throws if D's filesystem has less than `bytes` available to this user.
  void check_space(uint64_t bytes) const {
    struct statvfs st;
    if (::statvfs(dir_.c_str(), &st) != 0) io::throw_errno(dir_, "statvfs failed", errno);
    const double avail = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
    if (avail < static_cast<double>(bytes)) {
      char msg[160];
      std::snprintf(msg, sizeof msg, ": %.2f GiB free, the benchmark needs %.2f GiB",
                    avail / kBytesPerGiB, static_cast<double>(bytes) / kBytesPerGiB);
      throw IoError(dir_ + msg);
    }
  }

  void finish() {
    finished_ = true;
    cleanup();
  }

 private:
  void make(const std::string& path) {
    if (io::is_directory(path)) return;
    if (io::exists(path)) {
      throw IoError(dir_ + (path == dir_ ? "" : ": cannot create directory: " + path) +
                    ": exists and is not a directory");
    }
    if (::mkdir(path.c_str(), 0755) != 0) {
      const int err = errno;
      const std::string why = path == dir_ ? "" : " (at " + path + ")";
      throw IoError(dir_ + ": cannot create directory" + why + ": " + std::strerror(err));
    }
    created_.push_back(path);
  }
  void cleanup() {
    io::remove_tree(work_);
    remove_created();
  }
  // Only what this run created, innermost first, and only while empty.
  void remove_created() {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
      if (*it != work_ && ::rmdir(it->c_str()) != 0) break;
    }
  }

  std::string dir_, work_;
  std::vector<std::string> created_;
  bool finished_ = false;
};

struct CkptSeries {
  std::vector<double> s;
  double median() const {
    std::vector<double> v = s;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  double min() const { return *std::min_element(s.begin(), s.end()); }
  double max() const { return *std::max_element(s.begin(), s.end()); }
};

// Drops every file of a checkpoint from the page cache; returns the largest fraction of a
// file's pages still resident.
double drop_checkpoint(const std::string& ckpt_dir) {
  double worst = 0;
  for (const std::string& name : io::list_dir(ckpt_dir)) {
    worst = std::max(worst, drop_from_page_cache(io::join(ckpt_dir, name)));
  }
  return worst;
}

// Throws if /dev/shm has less than `bytes` free: the in-memory rows would otherwise fail after
// the disk measurements (or, sparse, crash).
void check_shm_space(uint64_t bytes) {
  struct statvfs st;
  if (::statvfs("/dev/shm", &st) != 0) return;  // no /dev/shm: shm_open says why, later
  const double avail = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
  if (avail < static_cast<double>(bytes)) {
    char msg[224];
    std::snprintf(msg, sizeof msg,
                  "/dev/shm: %.1f MiB free, the in-memory rows need %.1f MiB (make it larger, "
                  "e.g. docker run --shm-size, or give a smaller --gib)",
                  avail / (1 << 20), static_cast<double>(bytes) / (1 << 20));
    throw IoError(msg, ENOSPC);
  }
}

std::string goal_text(bool met) {
  return met ? "met" : "NOT met";
}

// Ctrl-C or SIGTERM: the repeat in progress finishes, then the scratch files are removed (by
// BenchDir's destructor, as for any error) and the command exits 1. A second signal kills.
void throw_if_stopped() {
  if (const int sig = stop_signal_received()) {
    throw std::runtime_error("bench ckpt: stopped by signal " + std::to_string(sig) +
                             "; scratch files removed");
  }
}

int run(const BenchCkptArgs& args) {
  install_stop_signal_handlers();
  const int ranks = args.ranks, repeats = args.repeats;
  const uint64_t count =
      std::max<uint64_t>(1, static_cast<uint64_t>(args.gib * kBytesPerGiB / (3 * sizeof(float))));
  BenchDir dir(args.dir);
  dir.check_space(3 * count * sizeof(float) + (uint64_t{64} << 20));

  BenchState state(count);  // source of every save and destination of every read
  check_shm_space(memory_snapshot_bench_bytes(state, ranks));
  const double bytes = static_cast<double>(state.bytes()), gib = bytes / kBytesPerGiB;
  auto sync_writers = make_bench_writers(AsyncCheckpointWriter::Mode::kSync, state, ranks);
  auto async_writers = make_bench_writers(AsyncCheckpointWriter::Mode::kAsync, state, ranks);

  std::printf(
      "bench ckpt: %.2f GiB (params, adam_m, adam_v: 3 x %llu floats) in %d shard%s "
      "under %s, %d repeat%s, medians\n",
      gib, static_cast<unsigned long long>(count), ranks, ranks == 1 ? "" : "s", args.dir.c_str(),
      repeats, repeats == 1 ? "" : "s");
  std::fflush(stdout);

  CkptSeries write_plain, save, read_cold, restore_cold, read_warm, restore_warm, stall_sync,
      stall_async, async_staged, async_done, mem_in, mem_save, mem_out, mem_restore, verify_one,
      verify_shared;
  double resident = 0;
  const std::string plain_file = io::join(dir.work(), "plain.bin");
  const std::string save_run = io::join(dir.work(), "save"),
                    sync_run = io::join(dir.work(), "sync"),
                    async_run = io::join(dir.work(), "async");
  for (int k = 0; k < repeats; ++k) {
    throw_if_stopped();
    const int64_t step = k + 1;
    write_plain.s.push_back(bench_write_fsync(plain_file, state));
    std::string ckpt;
    save.s.push_back(bench_checkpoint_save(save_run, state, ranks, step, &ckpt));

    const Manifest manifest = load_manifest(ckpt);
    // Each read into scrambled buffers (untimed), so that the check proves it wrote them all.
    resident = std::max(resident, drop_checkpoint(ckpt));
    state.scramble();
    read_cold.s.push_back(bench_read_plain(ckpt, manifest, state));
    state.check("plain read of " + ckpt);
    resident = std::max(resident, drop_checkpoint(ckpt));
    state.scramble();
    restore_cold.s.push_back(bench_restore(ckpt, state));
    state.check("restore of " + ckpt);
    state.scramble();
    read_warm.s.push_back(bench_read_plain(ckpt, manifest, state));
    state.check("plain read of " + ckpt);
    state.scramble();
    restore_warm.s.push_back(bench_restore(ckpt, state));
    state.check("restore of " + ckpt);
    resident = std::max(resident, drop_checkpoint(ckpt));
    verify_one.s.push_back(bench_verify(ckpt, 1));
    resident = std::max(resident, drop_checkpoint(ckpt));
    verify_shared.s.push_back(bench_verify(ckpt, ranks));
    io::remove_tree(save_run);

    stall_sync.s.push_back(bench_writer_save(sync_writers, sync_run, state, step, 600).blocked);
    io::remove_tree(sync_run);
    // Rank 0's thread waits for the other shards; if one failed, give up well before 600 s.
    const double timeout = std::max(60.0, 10 * stall_sync.s.back());
    const WriterSaveTimes a = bench_writer_save(async_writers, async_run, state, step, timeout);
    stall_async.s.push_back(a.blocked);
    async_staged.s.push_back(a.staged);
    async_done.s.push_back(a.done);
    io::remove_tree(async_run);

    const MemorySnapshotTimes mem = bench_memory_snapshot(state, ranks);
    mem_in.s.push_back(mem.memcpy_in);
    mem_save.s.push_back(mem.save);
    mem_out.s.push_back(mem.memcpy_out);
    mem_restore.s.push_back(mem.restore);
  }
  throw_if_stopped();
  sync_writers.clear();
  async_writers.clear();
  dir.finish();

  // One row: median seconds, min, max, GiB/s, and the comparison with the baseline.
  auto row = [&](const char* name, const CkptSeries& x, const std::string& vs) {
    // Under a millisecond nothing was moved (async save() only hands pointers over): no rate.
    char rate[16] = "       -";
    if (x.median() >= 1e-3) std::snprintf(rate, sizeof rate, "%8.2f", gib / x.median());
    std::printf("  %-34s %9.4f %9.4f %9.4f %s   %s\n", name, x.median(), x.min(), x.max(), rate,
                vs.c_str());
  };
  auto ratio = [](double r, const char* what, const std::string& goal) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.2fx %s (%s)", r, what, goal.c_str());
    return std::string(buf);
  };
  char goal[64];
  std::printf("  %-34s %9s %9s %9s %8s   %s\n", "", "seconds", "min", "max", "GiB/s",
              "vs baseline");
  std::printf("save, fsynced\n");
  row("plain write+fsync (baseline)", write_plain, "");
  const double save_r = write_plain.median() / save.median();
  std::snprintf(goal, sizeof goal, "goal >= %.2fx: %s", kSaveGoal,
                goal_text(save_r >= kSaveGoal).c_str());
  row("checkpoint save", save, ratio(save_r, "speed", goal));

  std::printf("training stall per save (caller blocked, all %d rank%s)\n", ranks,
              ranks == 1 ? "" : "s");
  row("sync save() (baseline)", stall_sync, "");
  row("async save() returns", stall_async,
      ratio(stall_async.median() / stall_sync.median(), "time", "no goal"));
  const double stall_r = async_staged.median() / stall_sync.median();
  std::snprintf(goal, sizeof goal, "worst case; goal <= %.2fx: %s", kStallGoal,
                goal_text(stall_r <= kStallGoal).c_str());
  row("async save() + staging copy", async_staged, ratio(stall_r, "time", goal));
  row("async save() until wait() returns", async_done,
      ratio(async_done.median() / stall_sync.median(), "time", "no goal"));

  std::printf("restore (every buffer, checksums verified)\n");
  row("plain read, cold (baseline)", read_cold, "");
  row("checkpoint restore, cold", restore_cold,
      ratio(read_cold.median() / restore_cold.median(), "speed", "no goal"));
  row("plain read, warm (baseline)", read_warm, "");
  row("checkpoint restore, warm", restore_warm,
      ratio(read_warm.median() / restore_warm.median(), "speed", "no goal"));

  std::printf("resume's verification, cold (every piece's checksum)\n");
  row("one reader, all of it (baseline)", verify_one, "");
  std::snprintf(goal, sizeof goal, "%d readers, a share each: the ranks'", ranks);
  row("shared by the ranks", verify_shared,
      ratio(verify_one.median() / verify_shared.median(), "speed", goal));

  std::printf("in memory, /dev/shm (checkpoint.memory_every; every byte hashed)\n");
  row("plain memcpy into shm (baseline)", mem_in, "");
  row("memory snapshot save", mem_save,
      ratio(mem_in.median() / mem_save.median(), "speed", "no goal"));
  row("plain memcpy out of shm (baseline)", mem_out, "");
  row("memory snapshot restore", mem_restore,
      ratio(mem_out.median() / mem_restore.median(), "speed", "no goal"));

  const char* shards = ranks == 1 ? "" : "s";
  std::printf(
      "# save: write_shard (write, fsync, read back) for each of the %d shard%s in turn, then\n"
      "#   commit_checkpoint;\n"
      "#   baseline: the same bytes to one file, 8 MiB write(2) calls, fsync, fsync dir.\n"
      "# stall: one AsyncCheckpointWriter per rank, async ones reserve()d first as the trainer\n"
      "#   does at start-up; the previous save had finished (else save() waits for it first).\n"
      "#   The writer thread copies the buffers into staging, then writes. 'save() + staging\n"
      "#   copy' is the stall of a caller that changes its buffers at once; a trainer waits for\n"
      "#   the copy only before its next optimizer update, after the next forward and backward,\n"
      "#   so in training it stalls for max(0, copy - forward/backward): see ckpt_stall_ms in\n"
      "#   RUN_DIR/metrics.jsonl.\n",
      ranks, shards);
  if (ranks > 1) {
    std::printf(
        "#   This process acts as all %d ranks in turn, so a stall is the sum of their save()\n"
        "#   calls. A job's sync stall is the whole save too (rank 0 waits for every shard, the\n"
        "#   others for rank 0); its ranks copy in parallel, so its async stall is between 1/%d\n"
        "#   of this (a rank per node) and all of it (ranks sharing one memory bus).\n",
        ranks, ranks);
  }
  std::printf(
      "# cold: files dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED) after\n"
      "#   fsync (at most %.1f%% of a file's pages still resident, by mincore); a disk or VM host\n"
      "#   cache below this kernel may still hold them. Every read was checked element by\n"
      "#   element against what was written.\n",
      100 * resident);
  return kExitOk;
}

}  // namespace

int cmd_bench_ckpt(const BenchCkptArgs& args) {
  return report_errors([&] { return run(args); });
}

}  // namespace rm
