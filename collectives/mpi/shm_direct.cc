// ShmEngine's registered buffers: allocation, announcement and the one-pass algorithms.
#include <sys/statvfs.h>

#include <cstring>
#include <string>

#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/shm_engine.h"
#include "collectives/reduce_kernels.h"

namespace rm::detail {
namespace {

// announce word: 0 for a buffer outside every region, else (region + 1) << 48 | byte offset.
constexpr int kRegionShift = 48;
constexpr uint64_t kOffsetMask = (uint64_t{1} << kRegionShift) - 1;

// task word: the task's number (low 40 bits: a trillion collectives), kind, dtype and op.
constexpr int kKindShift = 40;
constexpr int kDtypeShift = 48;
constexpr int kOpShift = 56;
constexpr uint64_t kNumberMask = (uint64_t{1} << kKindShift) - 1;

uint64_t task_word(uint64_t number, const ShmTask& task) {
  const uint64_t word = (number & kNumberMask) | static_cast<uint64_t>(task.kind) << kKindShift;
  if (task.kind == ShmKind::kBarrier) return word;  // moves no data: no dtype, no op
  // An all-gather reduces nothing: its op is whatever the caller left there.
  const auto op = task.kind == ShmKind::kAllGather ? 0 : static_cast<uint64_t>(task.asked) + 1;
  return word | static_cast<uint64_t>(task.dtype) << kDtypeShift | op << kOpShift;
}

// FNV-1a over the counts' bytes: tells apart shardings of the same total.
uint64_t hash_counts(const std::vector<size_t>& counts) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t count : counts) {
    for (int byte = 0; byte < 8; ++byte) {
      hash = (hash ^ ((count >> (8 * byte)) & 0xff)) * 1099511628211ull;
    }
  }
  return hash;
}

}  // namespace

void* ShmEngine::allocate(size_t bytes) {
  const ThrowMpiError on_error{"Communicator::allocate"};
  // Open MPI backs shared windows with files in /dev/shm. tmpfs hands out pages lazily, so a
  // window larger than its free space would not fail here but crash with SIGBUS on first touch
  // (Docker's default /dev/shm is 64 MiB). Check first -- every rank, agreeing, so that all
  // throw or none enters the collective allocation.
  const double need = static_cast<double>(bytes + kShmPage) * size_;
  struct statvfs fs;
  double free_bytes = statvfs("/dev/shm", &fs) == 0
                          ? static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize)
                          : need;  // no /dev/shm: nothing to check
  RM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_DOUBLE, MPI_MIN, comm_), on_error);
  if (free_bytes < need) {
    throw CollectiveError("[" + rank_name(rank_) + "/" + std::to_string(world_size_) +
                          "] Communicator::allocate(" + std::to_string(bytes) + "): /dev/shm has " +
                          std::to_string(static_cast<long>(free_bytes / 1e6)) +
                          " MB free, the shared window needs " +
                          std::to_string(static_cast<long>(need / 1e6)) +
                          " MB (enlarge it, e.g. docker run --shm-size)");
  }
  MPI_Info info;
  RM_MPI_CHECK(MPI_Info_create(&info), on_error);
  RM_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"), on_error);
  Region region;
  char* raw = nullptr;
  RM_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes + kShmPage), 1, info, comm_,
                                       &raw, &region.win),
               on_error);
  MPI_Info_free(&info);
  char* base = shm_page_align(raw);
  std::memset(base, 0, bytes);  // the first touch, once, by the owner (its NUMA node)
  for (int r = 0; r < size_; ++r) {
    MPI_Aint part = 0;
    int disp_unit = 0;
    char* ptr = nullptr;
    RM_MPI_CHECK(MPI_Win_shared_query(region.win, r, &part, &disp_unit, &ptr), on_error);
    char* aligned = shm_page_align(ptr);
    region.bases.push_back(aligned);
    region.bytes.push_back(static_cast<size_t>(part) - static_cast<size_t>(aligned - ptr));
  }
  regions_.push_back(std::move(region));
  return base;
}

int ShmEngine::find_region(const char* buf, size_t bytes, size_t* offset) const {
  for (size_t i = 0; i < regions_.size(); ++i) {
    const char* base = regions_[i].bases[static_cast<size_t>(rank_)];
    if (buf >= base && buf + bytes <= base + regions_[i].bytes[static_cast<size_t>(rank_)]) {
      *offset = static_cast<size_t>(buf - base);
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string ShmEngine::rank_name(int r) const {
  return "rank " + std::to_string(rank_base_ + r);
}

uint64_t ShmEngine::announcement() const {
  if (region_ < 0) return 0;
  return static_cast<uint64_t>(region_ + 1) << kRegionShift | region_offset_;
}

void ShmEngine::announce(size_t total) {
  ++announced_tasks_;
  auto& slot = control_[static_cast<size_t>(rank_)]->announce[announced_tasks_ % 2];
  // Relaxed: published by the release in the task's first publish().
  slot.where.store(announcement(), std::memory_order_relaxed);
  slot.task.store(task_word(issued_tasks_, task_), std::memory_order_relaxed);
  slot.total.store(total, std::memory_order_relaxed);
  slot.counts_hash.store(hash_counts(task_.counts), std::memory_order_relaxed);
  check_pending_ = true;
}

std::string ShmEngine::describe_task(uint64_t task, uint64_t total) const {
  const auto kind = static_cast<ShmKind>((task >> kKindShift) & 0xff);
  const auto dtype = static_cast<DType>((task >> kDtypeShift) & 0xff);
  const uint64_t op = task >> kOpShift;
  if (kind == ShmKind::kBarrier) return "barrier #" + std::to_string(task & kNumberMask);
  std::string text = kind == ShmKind::kAllReduce       ? "all_reduce"
                     : kind == ShmKind::kReduceScatter ? "reduce_scatter"
                                                       : "all_gather";
  text += " #" + std::to_string(task & kNumberMask) + " (" + dtype_name(dtype);
  if (op != 0) text += std::string(", ") + reduce_op_name(static_cast<ReduceOp>(op - 1));
  return text + ") of " + std::to_string(total) + " elements";
}

bool ShmEngine::check_announcements() {
  if (!check_pending_) return true;
  const uint64_t mine = announcement();
  size_t total = 0;
  for (size_t count : task_.counts) total += count;
  const auto& own = control_[static_cast<size_t>(rank_)]->announce[announced_tasks_ % 2];
  const uint64_t my_task = own.task.load(std::memory_order_relaxed);
  const uint64_t my_hash = own.counts_hash.load(std::memory_order_relaxed);
  peer_offsets_.assign(static_cast<size_t>(size_), 0);
  for (int r = 0; r < size_; ++r) {
    // Ordered after the peer's phase, which the caller has acquired.
    const auto& slot = control_[static_cast<size_t>(r)]->announce[announced_tasks_ % 2];
    const uint64_t their_task = slot.task.load(std::memory_order_relaxed);
    const uint64_t their_total = slot.total.load(std::memory_order_relaxed);
    if (their_task != my_task || their_total != total) {
      error_ = rank_name(r) + " runs " + describe_task(their_task, their_total) +
               " on the shared-memory path where " + rank_name(rank_) + " runs " +
               describe_task(my_task, total) +
               ": every rank must issue the same collectives in the same order";
      return false;
    }
    if (slot.counts_hash.load(std::memory_order_relaxed) != my_hash) {
      error_ = rank_name(r) + " splits " + describe_task(my_task, total) +
               " into other shard counts than " + rank_name(rank_) +
               ": every rank must pass the same counts";
      return false;
    }
    const uint64_t theirs = slot.where.load(std::memory_order_relaxed);
    if ((theirs == 0) != (mine == 0)) {
      error_ = rank_name(mine == 0 ? r : rank_) + " passed a buffer from allocate() and " +
               rank_name(mine == 0 ? rank_ : r) + " did not; every rank must, or none";
      return false;
    }
    if (mine == 0) continue;
    const size_t offset = theirs & kOffsetMask;
    if ((theirs >> kRegionShift) != (mine >> kRegionShift) ||
        offset + total * esize_ >
            regions_[static_cast<size_t>(region_)].bytes[static_cast<size_t>(r)]) {
      error_ = rank_name(r) + "'s buffer is not in the same allocate() block as this rank's";
      return false;
    }
    peer_offsets_[static_cast<size_t>(r)] = offset;
  }
  check_pending_ = false;
  return true;
}

char* ShmEngine::peer_buffer(int rank) const {
  const auto r = static_cast<size_t>(rank);
  return regions_[static_cast<size_t>(region_)].bases[r] + peer_offsets_[r];
}

void ShmEngine::direct_work() {
  const auto own = static_cast<size_t>(rank_);
  if (task_.kind == ShmKind::kAllGather) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const size_t at = offsets_[static_cast<size_t>(r)];
      std::memcpy(task_.buf + at, peer_buffer(r) + at,
                  task_.counts[static_cast<size_t>(r)] * esize_);
    }
    return;
  }
  // This rank's shard, summed in rank order straight from every rank's buffer; all-reduce
  // writes the result straight into every rank's buffer too.
  const size_t at = offsets_[own];
  for (int r = 0; r < size_; ++r) {
    srcs_[static_cast<size_t>(r)] = peer_buffer(r) + at;
    dsts_[static_cast<size_t>(r)] = peer_buffer(r) + at;
  }
  std::swap(dsts_[0], dsts_[own]);  // the own buffer first: with ndst = 1, only it
  const int ndst = task_.kind == ShmKind::kAllReduce ? size_ : 1;
  reduce_sources(task_.dtype, task_.op, size_, srcs_.data(), task_.counts[own], ndst, dsts_.data());
}

}  // namespace rm::detail
