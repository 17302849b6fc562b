#include "collectives/mpi/shm_engine.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include "collectives/mpi/mpi_check.h"
#include "collectives/reduce_kernels.h"

namespace rm::detail {

namespace {
constexpr size_t kControlBytes = kShmPage;  // keeps the slots page-aligned
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");
}  // namespace

char* shm_page_align(char* p) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + kShmPage - 1) / kShmPage *
                                 kShmPage);
}

ShmEngine::ShmEngine(MPI_Comm comm, size_t slot_bytes, int rank_base, int world_size)
    : comm_(comm), rank_base_(rank_base) {
  const ThrowMpiError on_error{"shared-memory engine setup"};
  RM_MPI_CHECK(MPI_Comm_rank(comm, &rank_), on_error);
  RM_MPI_CHECK(MPI_Comm_size(comm, &size_), on_error);
  world_size_ = world_size > 0 ? world_size : size_;
  const size_t n = static_cast<size_t>(size_);
  piece_cap_ = std::max<size_t>(64, slot_bytes / n / 64 * 64);  // 64 B: whole cache lines
  slot_bytes_ = piece_cap_ * n;

  // Each rank's segment on its own pages (noncontig), first-touched below by its owner.
  MPI_Info info;
  RM_MPI_CHECK(MPI_Info_create(&info), on_error);
  RM_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"), on_error);
  const size_t segment = kControlBytes + kSlots * slot_bytes_;
  char* raw = nullptr;
  RM_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(segment + kShmPage), 1, info, comm,
                                       &raw, &win_),
               on_error);
  MPI_Info_free(&info);
  RM_MPI_CHECK(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN), on_error);

  // Touch every page of the own segment now, so no operation ever pays a first touch.
  char* base = shm_page_align(raw);
  std::memset(base, 0, segment);
  static_assert(sizeof(Control) <= kControlBytes, "the control block fits its page");
  auto* own = new (base) Control;
  own->phase.store(0, std::memory_order_relaxed);
  own->futex.store(0, std::memory_order_relaxed);
  own->waiters.store(0, std::memory_order_relaxed);
  for (auto& slot : own->announce) {
    slot.where.store(0, std::memory_order_relaxed);
    slot.task.store(0, std::memory_order_relaxed);
    slot.total.store(0, std::memory_order_relaxed);
    slot.counts_hash.store(0, std::memory_order_relaxed);
  }
  own->cpu.store(-1, std::memory_order_relaxed);
  own->poisoned.store(0, std::memory_order_relaxed);
  own->liveness.store(0, std::memory_order_relaxed);

  control_.resize(n);
  slots_.resize(n);
  for (int r = 0; r < size_; ++r) {
    MPI_Aint bytes = 0;
    int disp_unit = 0;
    char* ptr = nullptr;
    RM_MPI_CHECK(MPI_Win_shared_query(win_, r, &bytes, &disp_unit, &ptr), on_error);
    ptr = shm_page_align(ptr);
    control_[static_cast<size_t>(r)] = reinterpret_cast<Control*>(ptr);
    slots_[static_cast<size_t>(r)] = ptr + kControlBytes;
  }
  srcs_.resize(n);
  dsts_.resize(n);
  // Every control block is initialised before anyone polls one.
  RM_MPI_CHECK(MPI_Barrier(comm), on_error);
}

ShmEngine::~ShmEngine() {
  // MPI_Win_free is collective: with a failed peer it could hang, and the job is ending anyway.
  if (poisoned_ || failed_peer() >= 0) return;
  for (Region& region : regions_) MPI_Win_free(&region.win);
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

void ShmEngine::start(ShmTask task) {
  task_ = std::move(task);
  error_.clear();
  ++issued_tasks_;
  if (task_.kind == ShmKind::kBarrier) {
    region_ = -1;
    announce(0);  // a barrier where a peer runs another task is named too
    publish();
    wait_phase_ = phase_;
    stage_ = Stage::kBarrierWait;
    return;
  }
  esize_ = dtype_size(task_.dtype);
  offsets_.assign(task_.counts.size(), 0);
  size_t total = 0;
  size_t max_count = 0;
  for (size_t r = 0; r < task_.counts.size(); ++r) {
    offsets_[r] = total * esize_;
    total += task_.counts[r];
    max_count = std::max(max_count, task_.counts[r]);
  }
  if (max_count == 0) {
    stage_ = Stage::kIdle;  // nothing to move; no rank waits for another
    return;
  }
  // Say where the buffer is and what the task is before the first publish, for peers to check.
  region_ = find_region(task_.buf, total * esize_, &region_offset_);
  announce(total);
  if (region_ >= 0) {
    publish();  // arrived: the buffer holds this rank's input
    wait_phase_ = phase_;
    stage_ = Stage::kDirect;
    return;
  }
  const size_t piece_elems = piece_cap_ / esize_;
  step_ = 0;
  nsteps_ = (max_count + piece_elems - 1) / piece_elems;
  begin_step();
}

void ShmEngine::begin_step() {
  stage_ = Stage::kSlotWait;
  wait_phase_ = slot_free_at_[global_step_ % kSlots];
}

void ShmEngine::finish_step() {
  slot_free_at_[global_step_ % kSlots] = phase_;
  ++global_step_;
  if (++step_ < nsteps_) {
    begin_step();
  } else {
    stage_ = Stage::kIdle;
  }
}

bool ShmEngine::advance() {
  for (;;) {
    switch (stage_) {
      case Stage::kIdle:
        return true;
      case Stage::kSlotWait:
        if (!peers_reached(wait_phase_)) return false;
        stage_ = Stage::kCopyIn;
        break;
      case Stage::kCopyIn:
        copy_in();
        publish();
        wait_phase_ = phase_;
        stage_ = task_.kind == ShmKind::kAllGather ? Stage::kCopyOut : Stage::kReduce;
        break;
      case Stage::kReduce:
        if (!peers_reached(wait_phase_) || !check_announcements()) return false;
        reduce();
        publish();
        wait_phase_ = phase_;
        if (task_.kind == ShmKind::kReduceScatter) {
          finish_step();
        } else {
          stage_ = Stage::kCopyOut;
        }
        break;
      case Stage::kCopyOut:
        if (!peers_reached(wait_phase_) || !check_announcements()) return false;
        copy_out();
        publish();
        finish_step();
        break;
      case Stage::kBarrierWait:
        if (!peers_reached(wait_phase_) || !check_announcements()) return false;
        stage_ = Stage::kIdle;
        break;
      case Stage::kDirect:
        if (!peers_reached(wait_phase_) || !check_announcements()) return false;
        direct_work();
        publish();
        wait_phase_ = phase_;
        stage_ = Stage::kDirectDone;
        break;
      case Stage::kDirectDone:
        if (!peers_reached(wait_phase_)) return false;
        stage_ = Stage::kIdle;
        break;
    }
  }
}

int ShmEngine::first_behind(uint64_t phase) const {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ &&
        control_[static_cast<size_t>(r)]->phase.load(std::memory_order_acquire) < phase) {
      return r;
    }
  }
  return -1;
}

bool ShmEngine::peers_reached(uint64_t phase) {
  return first_behind(phase) < 0;
}

void ShmEngine::publish() {
  // Release: the staging writes of this phase are visible before the new count. The futex word
  // and the waiters flag are sequentially consistent with a sleeper's (Dekker): either the
  // sleeper sees the new word and does not sleep, or this rank sees its flag and wakes it.
  Control* own = control_[static_cast<size_t>(rank_)];
  own->cpu.store(sched_getcpu(), std::memory_order_relaxed);
  own->phase.store(++phase_, std::memory_order_release);
  own->futex.store(static_cast<uint32_t>(phase_), std::memory_order_seq_cst);
  if (own->waiters.load(std::memory_order_seq_cst) != 0 &&
      own->waiters.exchange(0, std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, &own->futex, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

bool ShmEngine::waits_for_peer_on(int cpu) const {
  if (stage_ == Stage::kIdle || stage_ == Stage::kCopyIn) return false;
  for (int r = 0; r < size_; ++r) {
    const Control* control = control_[static_cast<size_t>(r)];
    if (r != rank_ && control->phase.load(std::memory_order_acquire) < wait_phase_ &&
        control->cpu.load(std::memory_order_relaxed) == cpu) {
      return true;
    }
  }
  return false;
}

void ShmEngine::block(long max_us) {
  if (stage_ == Stage::kIdle || stage_ == Stage::kCopyIn) return;
  const int peer = first_behind(wait_phase_);
  if (peer < 0) return;
  Control* control = control_[static_cast<size_t>(peer)];
  control->waiters.store(1, std::memory_order_seq_cst);
  const uint32_t word = control->futex.load(std::memory_order_seq_cst);
  if (control->phase.load(std::memory_order_acquire) >= wait_phase_) return;
  const timespec timeout{max_us / 1000000, (max_us % 1000000) * 1000};
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  syscall(SYS_futex, &control->futex, FUTEX_WAIT, word, &timeout, nullptr, 0);
}

// piece_cap_ is a multiple of 64, so pieces hold whole elements of every dtype.
size_t ShmEngine::piece_begin(int s) const {
  return offsets_[static_cast<size_t>(s)] + step_ * piece_cap_;
}

size_t ShmEngine::piece_bytes(int s) const {
  const size_t total = task_.counts[static_cast<size_t>(s)] * esize_;
  const size_t begin = step_ * piece_cap_;
  return begin >= total ? 0 : std::min(piece_cap_, total - begin);
}

char* ShmEngine::slot_of(int rank) const {
  return slots_[static_cast<size_t>(rank)] + (global_step_ % kSlots) * slot_bytes_;
}

void ShmEngine::copy_in() {
  // all-reduce / reduce-scatter: the pieces the other ranks reduce; all-gather: the own piece.
  char* slot = slot_of(rank_);
  for (int s = 0; s < size_; ++s) {
    const bool wanted = task_.kind == ShmKind::kAllGather ? s == rank_ : s != rank_;
    if (!wanted) continue;
    std::memcpy(slot + static_cast<size_t>(s) * piece_cap_, task_.buf + piece_begin(s),
                piece_bytes(s));
  }
}

void ShmEngine::reduce() {
  // The own piece, summed in rank order straight from the peers' slots; the result also goes to
  // the own slot when the peers will copy it out.
  const size_t bytes = piece_bytes(rank_);
  char* own = task_.buf + piece_begin(rank_);
  const size_t at = static_cast<size_t>(rank_) * piece_cap_;
  for (int r = 0; r < size_; ++r) {
    srcs_[static_cast<size_t>(r)] = r == rank_ ? own : slot_of(r) + at;
  }
  dsts_[0] = own;
  dsts_[1] = slot_of(rank_) + at;
  const int ndst = task_.kind == ShmKind::kAllReduce ? 2 : 1;
  reduce_sources(task_.dtype, task_.op, size_, srcs_.data(), bytes / esize_, ndst, dsts_.data());
}

void ShmEngine::copy_out() {
  for (int s = 0; s < size_; ++s) {
    if (s == rank_) continue;
    std::memcpy(task_.buf + piece_begin(s), slot_of(s) + static_cast<size_t>(s) * piece_cap_,
                piece_bytes(s));
  }
}

std::string ShmEngine::waiting_for() const {
  std::string ranks;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (control_[static_cast<size_t>(r)]->phase.load(std::memory_order_acquire) < wait_phase_) {
      ranks += (ranks.empty() ? "" : ",") + std::to_string(rank_base_ + r);
    }
  }
  if (stage_ == Stage::kIdle || ranks.empty()) return "";
  const char* what = stage_ == Stage::kSlotWait     ? "slot reuse"
                     : stage_ == Stage::kReduce     ? "reduce"
                     : stage_ == Stage::kCopyOut    ? "gather"
                     : stage_ == Stage::kDirect     ? "arrival, registered buffer"
                     : stage_ == Stage::kDirectDone ? "completion, registered buffer"
                                                    : "barrier";
  std::string text =
      "rank" + std::string(ranks.find(',') == std::string::npos ? " " : "s ") + ranks + " (";
  if (stage_ != Stage::kBarrierWait && stage_ != Stage::kDirect && stage_ != Stage::kDirectDone) {
    text += "step " + std::to_string(step_ + 1) + "/" + std::to_string(nsteps_) + ", ";
  }
  return text + what + ")";
}

int ShmEngine::blocking_peer() const {
  return stage_ == Stage::kIdle ? -1 : first_behind(wait_phase_);
}

uint64_t ShmEngine::share_liveness(uint64_t beats) {
  uint64_t peers = 0;
  for (int r = 0; r < size_; ++r) {
    std::atomic<uint64_t>& word = control_[static_cast<size_t>(r)]->liveness;
    if (r == rank_) {
      word.store(beats, std::memory_order_relaxed);
    } else {
      peers += word.load(std::memory_order_relaxed);
    }
  }
  return peers;
}

int ShmEngine::failed_peer() const {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && control_[static_cast<size_t>(r)]->poisoned.load(std::memory_order_acquire)) {
      return r;
    }
  }
  return -1;
}

void ShmEngine::poison() {
  poisoned_ = true;
  control_[static_cast<size_t>(rank_)]->poisoned.store(1, std::memory_order_release);
}

}  // namespace rm::detail
