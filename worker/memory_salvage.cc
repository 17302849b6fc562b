#include "worker/memory_salvage.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/memory_snapshot.h"
#include "worker/memory_checkpoints.h"

namespace rm {
namespace {

constexpr size_t kMetaBytes = kMemoryMetaWords * sizeof(int64_t);

// Who serves an old rank's slot of a step: the lowest new rank that holds it in the old rank's
// own segment, else the lowest that holds it in a replica; rank -1: nobody.
struct Server {
  int rank = -1;
  bool replica = false;
};

}  // namespace

int shrunk_from_ranks() {
  const char* v = std::getenv(kShrunkFromRanksEnv);
  return v != nullptr ? std::max(0, std::atoi(v)) : 0;
}

SalvagedStep salvage_memory_layout(const JobConfig& job, size_t total_params, int old_ranks,
                                   Communicator& comm, int64_t newer_than,
                                   const CommitSalvaged& commit) {
  const std::vector<size_t> counts = shard_counts(total_params, old_ranks);
  const size_t N = static_cast<size_t>(old_ranks), M = static_cast<size_t>(comm.size());
  const size_t me = static_cast<size_t>(comm.rank());
  // What this rank's host holds of each old rank r: held[me][4r..4r+1] its own segment's
  // verified steps, [4r+2..4r+3] its replica's (-1: none).
  std::vector<MemorySegmentId> ids;  // old rank r: 2r its own, 2r + 1 its replica
  std::vector<std::optional<MemorySnapshot>> segments(2 * N);
  std::vector<double> held(M * 4 * N, -1.0);
  std::string skipped;  // rank 0's slots passed over, and why
  for (size_t r = 0; r < N; ++r) {
    for (int replica = 0; replica < 2; ++replica) {
      ids.push_back(memory_segment_id(job.run_dir, job.parallel.shard, counts,
                                      static_cast<int>(r), replica != 0));
      std::string why;
      std::optional<MemorySnapshot> s =
          MemorySnapshot::open(ids.back().name, ids.back().owner, ids.back().capacity, &why);
      if (!s) continue;
      held_steps(*s, &held[me * 4 * N + 4 * r + 2 * static_cast<size_t>(replica)],
                 std::string(replica ? "replica of " : "") + "old rank " + std::to_string(r) + " ",
                 &skipped);
      segments[2 * r + static_cast<size_t>(replica)] = std::move(s);
    }
  }
  comm.all_gather(held.data(), std::vector<size_t>(M, 4 * N), DType::kFloat64)->wait();

  const auto server = [&](size_t r, double step) {
    Server s;
    for (int replica = 0; replica < 2 && s.rank < 0; ++replica) {
      for (size_t k = 0; k < M && s.rank < 0; ++k) {
        const double* h = &held[k * 4 * N + 4 * r + 2 * static_cast<size_t>(replica)];
        if (h[0] == step || h[1] == step) s = {static_cast<int>(k), replica != 0};
      }
    }
    return s;
  };
  std::optional<int64_t> step;
  for (double c : held) {
    if (c < 0 || (step && static_cast<int64_t>(c) <= *step)) continue;
    bool everywhere = true;
    for (size_t r = 0; r < N && everywhere; ++r) everywhere = server(r, c).rank >= 0;
    if (everywhere) step = static_cast<int64_t>(c);
  }
  SalvagedStep out;
  // Only the segments that opened as the old layout's: the names are the rank's alone, so one
  // refused (another owner, another size) may be the current layout's, which a later attempt
  // still set up to salvage the old one (the launcher keeps RM_SHRUNK_FROM_RANKS) must not lose.
  const auto remove_all = [&] {
    for (size_t i = 0; i < segments.size(); ++i) {
      if (segments[i]) {
        segments[i].reset();
        MemorySnapshot::remove(ids[i].name);
      }
    }
  };
  const std::string from = "the in-memory checkpoints of the earlier " + std::to_string(N) +
                           " ranks";
  out.skipped = skipped.empty() ? "" : "rank 0: " + skipped.substr(2);
  // Every rank has read what it will read (the gather above) before any segment goes.
  if (std::none_of(held.begin(), held.end(), [](double h) { return h >= 0; })) {
    remove_all();  // nothing of use left (salvaged by an earlier attempt, or never kept)
    return out;
  }
  if (!step || *step <= newer_than) {
    out.account = from + (step ? ": newest step every old rank can restore is " +
                                     std::to_string(*step) + ", not newer than the disk"
                               : ": no step that every old rank can restore");
    remove_all();
    return out;
  }

  // Each old rank's shard, written by the rank that serves it.
  std::string failed;
  // What old rank 0's slot records: optimizer steps, the number of skipped batches, those, then
  // the data's windows and its fingerprint's two 32-bit halves (doubles hold them exactly).
  std::vector<double> meta;
  const double c = static_cast<double>(*step);
  std::string account;
  int meta_root = -1;
  try {
    const std::string tmp = prepare_checkpoint_dir(job.run_dir, *step);
    for (size_t r = 0; r < N; ++r) {
      const Server s = server(r, c);
      if (r == 0) meta_root = s.rank;
      if (s.replica) {
        account += (account.empty() ? "" : ", ") + std::to_string(r);
      }
      if (s.rank != static_cast<int>(me)) continue;
      const MemorySnapshot& seg = *segments[2 * r + (s.replica ? 1 : 0)];
      const std::optional<MemorySnapshot::SlotCopy> slot = seg.verified_slot(*step);
      const size_t floats = counts[r];
      if (!slot || slot->bytes != kMetaBytes + 3 * floats * sizeof(float)) {
        throw std::runtime_error(seg.name() + ": step " + std::to_string(*step) +
                                 " no longer verifies");
      }
      const auto* words = reinterpret_cast<const int64_t*>(slot->data);
      if (words[0] != *step || words[2] < 0 || static_cast<size_t>(words[2]) > kMemoryMaxSkipped) {
        throw std::runtime_error(seg.name() + ": its record of step " + std::to_string(*step) +
                                 " does not match");
      }
      if (r == 0) {
        meta.assign({static_cast<double>(words[1]), static_cast<double>(words[2])});
        for (int64_t i = 0; i < words[2]; ++i) meta.push_back(static_cast<double>(words[3 + i]));
        const auto fingerprint = static_cast<uint64_t>(words[kMemoryTrainFingerprintWord]);
        meta.push_back(static_cast<double>(words[kMemoryTrainWindowsWord]));
        meta.push_back(static_cast<double>(fingerprint >> 32));
        meta.push_back(static_cast<double>(fingerprint & 0xffffffffu));
      }
      const auto* f = reinterpret_cast<const float*>(slot->data + kMetaBytes);
      const uint64_t begin = shard_offset(counts, static_cast<int>(r)), end = begin + floats;
      write_shard(tmp, *step, static_cast<int>(r),
                  {{"params", begin, end, f},
                   {"adam_m", begin, end, f + floats},
                   {"adam_v", begin, end, f + 2 * floats}});
    }
  } catch (const std::exception& e) {
    failed = e.what();
  }
  double bad = failed.empty() ? 0.0 : 1.0;
  comm.all_reduce(&bad, 1, DType::kFloat64, ReduceOp::kSum)->wait();
  if (bad > 0) {
    throw std::runtime_error("salvaging " + from + " at step " + std::to_string(*step) +
                             ": failed on " + std::to_string(static_cast<int>(bad)) + " rank(s)" +
                             (failed.empty() ? "" : "; this rank: " + failed));
  }
  // Old rank 0's record goes to every rank (its size first), for rank 0 to commit.
  double size = static_cast<double>(meta.size());
  comm.broadcast(&size, 1, DType::kFloat64, meta_root)->wait();
  meta.resize(static_cast<size_t>(size));
  comm.broadcast(meta.data(), meta.size(), DType::kFloat64, meta_root)->wait();
  std::vector<int64_t> skipped_batches;
  for (size_t i = 2; i + 3 < meta.size(); ++i) {
    skipped_batches.push_back(static_cast<int64_t>(meta[i]));
  }
  const size_t n = meta.size();
  const auto train_windows = static_cast<uint64_t>(meta[n - 3]);
  const uint64_t train_fingerprint =
      (static_cast<uint64_t>(meta[n - 2]) << 32) | static_cast<uint64_t>(meta[n - 1]);
  if (comm.rank() == 0) {
    try {
      const std::string tmp = prepare_checkpoint_dir(job.run_dir, *step);
      commit(*step, static_cast<int64_t>(meta[0]), skipped_batches, train_windows,
             train_fingerprint, collect_shards(tmp, *step, old_ranks, 0));
    } catch (const std::exception& e) {
      failed = e.what();
    }
  }
  bad = failed.empty() ? 0.0 : 1.0;
  comm.all_reduce(&bad, 1, DType::kFloat64, ReduceOp::kSum)->wait();
  if (bad > 0) {
    throw std::runtime_error("salvaging " + from + " at step " + std::to_string(*step) +
                             ": the commit failed" + (failed.empty() ? "" : ": " + failed));
  }
  remove_all();
  out.step = step;
  const bool several = account.find(',') != std::string::npos;
  out.account = from + ": step " + std::to_string(*step) + " of every old rank" +
                (account.empty() ? " from its own segment"
                                 : std::string(" (old rank") + (several ? "s " : " ") + account +
                                       " from replicas)");
  return out;
}

}  // namespace rm
