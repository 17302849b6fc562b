#include "worker/memory_checkpoints.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "worker/fault_injection.h"

namespace rm {
namespace {

constexpr size_t kMetaWords = kMemoryMetaWords;

uint64_t hash_text(const std::string& s) { return XXH64(s.data(), s.size(), 0); }

std::string held_text(const double* steps) {
  std::string s;
  for (int i = 0; i < 2; ++i) {
    if (steps[i] < 0) continue;
    s += (s.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(steps[i]));
  }
  return s.empty() ? "nothing" : "step" + std::string(steps[1] >= 0 ? "s " : " ") + s;
}

}  // namespace

void held_steps(const MemorySnapshot& snap, double* out, const std::string& what,
                std::string* skipped) {
  int n = 0;
  for (const MemorySnapshot::SlotReport& r : snap.verify()) {
    if (r.usable && n < 2) {
      out[n++] = static_cast<double>(r.step);
    } else if (!r.usable && r.why != "never written") {
      *skipped += "; " + what + "slot " + std::to_string(r.slot) + " skipped: " + r.why;
    }
  }
}

std::string remove_orphaned_memory_checkpoints() {
  const std::vector<std::string> removed = MemorySnapshot::remove_orphans("/ringmaster-");
  if (removed.empty()) return "";
  std::string line = "removed " + std::to_string(removed.size()) + " in-memory checkpoint segment" +
                     (removed.size() == 1 ? "" : "s") +
                     " of runs whose directory is gone, from /dev/shm: ";
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < removed.size() && i < kNamed; ++i) {
    line += (i == 0 ? "" : ", ") + removed[i];
  }
  if (removed.size() > kNamed) line += " and " + std::to_string(removed.size() - kNamed) + " more";
  return line;
}

std::string remove_run_memory_checkpoints(const std::string& run_dir) {
  const std::string dir = std::filesystem::absolute(run_dir).lexically_normal().string();
  std::string prefix = memory_snapshot_name(hash_text(dir), 0);
  prefix.resize(prefix.size() - 1);  // "/ringmaster-<hash>-r": every rank's, and replicas
  const std::vector<std::string> removed = MemorySnapshot::remove_homed(prefix, dir);
  if (removed.empty()) return "";
  return "removed " + std::to_string(removed.size()) + " in-memory checkpoint segment" +
         (removed.size() == 1 ? "" : "s") + " of this run's earlier attempts from /dev/shm";
}

MemorySegmentId memory_segment_id(const std::string& run_dir, ShardMode shard,
                                  const std::vector<size_t>& slice_counts, int rank, bool replica) {
  const std::string dir = std::filesystem::absolute(run_dir).lexically_normal().string();
  MemorySegmentId id;
  const size_t floats = 3 * slice_counts.at(static_cast<size_t>(rank));
  id.capacity = kMetaWords * sizeof(int64_t) + floats * sizeof(float);
  id.name = memory_snapshot_name(hash_text(dir), rank) + (replica ? "-replica" : "");
  id.home = dir;
  id.owner = hash_text(dir + "|" + (replica ? "replica of rank " : "rank ") +
                       std::to_string(rank) + " of " + std::to_string(slice_counts.size()) +
                       "|shard " + choice_name(shard) + "|floats " + std::to_string(id.capacity));
  return id;
}

MemoryCheckpoints::MemoryCheckpoints(const JobConfig& job, ShardedState& state, Compute& compute,
                                     Communicator& host_comm, const std::vector<int>& host_of_rank)
    : job_(job), state_(state), compute_(compute), comm_(host_comm), meta_(kMetaWords, 0) {
  const MemorySegmentId own = memory_segment_id(job.run_dir, job.parallel.shard,
                                                state_.slice_counts(), comm_.rank(), false);
  name_ = own.name;
  owner_ = own.owner;
  home_ = own.home;
  for (const ShardedState::LocalPart& p : state_.own_slices()) floats_ += p.floats;
  if (host_of_rank.size() == static_cast<size_t>(comm_.size())) {
    ring_ = replica_ring(host_of_rank);
  } else {
    ring_.why_none = "one host: no other host to keep a replica";
  }
  if (ring_.on()) {
    keeper_ = ring_.keeper[static_cast<size_t>(comm_.rank())];
    kept_ = ring_.kept_by(comm_.rank());
    const MemorySegmentId kept = memory_segment_id(job.run_dir, job.parallel.shard,
                                                   state_.slice_counts(), kept_, true);
    replica_name_ = kept.name;
    replica_owner_ = kept.owner;
  }
}

MemoryCheckpoints::~MemoryCheckpoints() {
  try {
    finish_exchange();
  } catch (const std::exception&) {
    // A peer is gone: the job is failing anyway, and what was in flight is lost.
  }
}

void MemoryCheckpoints::open_replica() {
  if (!replica_) {
    replica_ = MemorySnapshot::create(replica_name_, replica_owner_, capacity_of(kept_), home_);
  }
}

// Messages of at most this many bytes (MPI counts are ints).
constexpr size_t kPiece = size_t{1} << 30;

void MemoryCheckpoints::post_pieces(std::vector<std::unique_ptr<Work>>& works, bool send,
                                    char* data, size_t bytes, int peer) {
  for (size_t done = 0; done < bytes; done += kPiece) {
    const size_t n = std::min(kPiece, bytes - done);
    works.push_back(send ? comm_.send(data + done, n, peer) : comm_.recv(data + done, n, peer));
  }
}

void MemoryCheckpoints::start_exchange(const MemorySnapshot::SlotCopy* slot, int to,
                                       MemorySnapshot* into, size_t into_bytes, int from) {
  record_out_[0] = slot != nullptr ? slot->step : -1;
  record_out_[1] = slot != nullptr ? static_cast<int64_t>(slot->bytes) : 0;
  record_out_[2] = slot != nullptr ? static_cast<int64_t>(slot->checksum) : 0;
  record_in_[0] = -1;
  pending_.push_back(comm_.recv(record_in_, sizeof record_in_, into != nullptr ? from : -1));
  pending_.push_back(comm_.send(record_out_, sizeof record_out_, slot != nullptr ? to : -1));
  if (into != nullptr) {
    receiving_ = into;
    receiving_bytes_ = into_bytes;
    post_pieces(pending_, /*send=*/false, into->begin_receive(into_bytes), into_bytes, from);
  }
  if (slot != nullptr) {
    post_pieces(pending_, /*send=*/true, const_cast<char*>(slot->data), slot->bytes, to);
  }
}

bool MemoryCheckpoints::finish_exchange() {
  for (std::unique_ptr<Work>& w : pending_) w->wait();
  pending_.clear();
  if (receiving_ == nullptr) return false;
  MemorySnapshot* into = receiving_;
  receiving_ = nullptr;
  // A record that does not describe what was received leaves the slot "being written": never
  // read.
  if (record_in_[0] < 0 || static_cast<size_t>(record_in_[1]) != receiving_bytes_) return false;
  into->commit_received(record_in_[0], receiving_bytes_, static_cast<uint64_t>(record_in_[2]));
  return true;
}

void MemoryCheckpoints::poll() {
  if (pending_.empty()) return;
  for (std::unique_ptr<Work>& w : pending_) {
    if (!w->test()) return;
  }
  finish_exchange();
}

std::vector<SnapshotPart> MemoryCheckpoints::host_parts() {
  std::vector<SnapshotPart> parts = {{meta_.data(), meta_.size() * sizeof(int64_t)}};
  if (compute_.host_accessible()) {
    for (const ShardedState::LocalPart& p : state_.own_slices()) {
      parts.push_back({p.data, p.floats * sizeof(float)});
    }
    return parts;
  }
  staging_.resize(floats_);
  parts.push_back({staging_.data(), floats_ * sizeof(float)});
  return parts;
}

void MemoryCheckpoints::save(int64_t steps_done, const std::vector<int64_t>& skipped_batches,
                             uint64_t train_windows, uint64_t train_fingerprint) {
  finish_exchange();  // the slot the last exchange sent is the one this save must not touch...
  if (skipped_batches.size() > kMemoryMaxSkipped) return;  // thousands of rollbacks: disk only
  std::fill(meta_.begin(), meta_.end(), 0);
  meta_[0] = steps_done;
  meta_[1] = state_.optimizer_steps();
  meta_[2] = static_cast<int64_t>(skipped_batches.size());
  std::copy(skipped_batches.begin(), skipped_batches.end(), meta_.begin() + 3);
  meta_[kMemoryTrainWindowsWord] = static_cast<int64_t>(train_windows);
  meta_[kMemoryTrainFingerprintWord] = static_cast<int64_t>(train_fingerprint);
  const std::vector<SnapshotPart> parts = host_parts();
  if (!compute_.host_accessible()) {
    float* dst = staging_.data();
    for (const ShardedState::LocalPart& p : state_.own_slices()) {
      compute_.download(dst, p.data, p.floats * sizeof(float));
      dst += p.floats;
    }
  }
  if (!snapshot_) snapshot_ = MemorySnapshot::create(name_, owner_, capacity(), home_);
  maybe_fault_in_memory_save(comm_.rank(), steps_done, /*replica_posted=*/false);
  snapshot_->save(steps_done, parts);  // ...and does not: it writes the other one
  if (!ring_.on()) return;
  open_replica();
  const std::optional<MemorySnapshot::SlotCopy> slot = snapshot_->last_saved();
  start_exchange(&*slot, keeper_, &*replica_, capacity_of(kept_), kept_);
  maybe_fault_in_memory_save(comm_.rank(), steps_done, /*replica_posted=*/true);
}

MemoryCheckpoints::Agreed MemoryCheckpoints::agree_on_step() {
  finish_exchange();
  std::string why = "no segment";
  if (!snapshot_) {
    if (std::optional<MemorySnapshot> s = MemorySnapshot::open(name_, owner_, capacity(), &why)) {
      snapshot_ = std::move(*s);
    }
  }
  // Per rank: the two steps it holds verified, then the two of the replica it keeps (-1: none).
  std::string skipped;  // this rank's slots passed over, and why
  const size_t R = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  held_.assign(4 * R, -1.0);
  if (snapshot_) {
    held_steps(*snapshot_, &held_[4 * me], "", &skipped);
  } else {
    skipped = "; " + why;
  }
  if (ring_.on() && !replica_) {
    std::string replica_why;
    if (std::optional<MemorySnapshot> s =
            MemorySnapshot::open(replica_name_, replica_owner_, capacity_of(kept_), &replica_why)) {
      replica_ = std::move(*s);
    }
  }
  if (replica_) {
    held_steps(*replica_, &held_[4 * me + 2], "replica of rank " + std::to_string(kept_) + " ",
               &skipped);
  }
  comm_.all_gather(held_.data(), std::vector<size_t>(R, 4), DType::kFloat64)->wait();

  // Rank r can restore step c from its own slots, or from the replica its keeper holds.
  const auto own = [&](size_t r, double c) { return held_[4 * r] == c || held_[4 * r + 1] == c; };
  const auto restorable = [&](size_t r, double c) {
    if (own(r, c)) return true;
    if (!ring_.on()) return false;
    const size_t k = static_cast<size_t>(ring_.keeper[r]);
    return held_[4 * k + 2] == c || held_[4 * k + 3] == c;
  };
  Agreed a;
  for (double c : held_) {
    if (c < 0 || (a.step && static_cast<int64_t>(c) <= *a.step)) continue;
    bool everywhere = true;
    for (size_t r = 0; r < R && everywhere; ++r) everywhere = restorable(r, c);
    if (everywhere) a.step = static_cast<int64_t>(c);
  }
  a.account = "in memory: ";
  for (size_t r = 0; r < R; ++r) {
    a.account += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " holds " +
                 held_text(&held_[4 * r]);
    // Rank 0's slots passed over, and why, beside its own; other ranks say theirs in their logs.
    if (r == 0 && me == 0 && !skipped.empty()) a.account += " (" + skipped.substr(2) + ")";
    if (a.step && !own(r, static_cast<double>(*a.step))) {
      a.account += " (step " + std::to_string(*a.step) + " from its replica on rank " +
                   std::to_string(ring_.keeper[r]) + ")";
    }
  }
  if (me != 0 && snapshot_ && !skipped.empty()) {  // slots passed over, not "no segment"
    std::printf("ringmaster: rank %zu: in memory, %s\n", me, skipped.substr(2).c_str());
    std::fflush(stdout);
  }
  return a;
}

MemoryCheckpoints::Restored MemoryCheckpoints::restore(int64_t step) {
  maybe_delay_memory_restore(comm_.rank(), step);
  finish_exchange();
  const double c = static_cast<double>(step);
  const auto own = [&](int r) {
    return r >= 0 && r < comm_.size() &&
           (held_[4 * static_cast<size_t>(r)] == c || held_[4 * static_cast<size_t>(r) + 1] == c);
  };
  std::string why = "no segment";
  bool fetched = true;  // false: this rank needed its replica and did not get it
  if (ring_.on() && held_.size() == 4 * static_cast<size_t>(comm_.size())) {
    // Replicas go back to the ranks whose own segments lack the step: this rank sends the one
    // it keeps if its owner needs it, and receives its own from its keeper if it needs it.
    // The records first, so that both ends know whether bytes follow: a keeper whose replica
    // no longer verifies sends a record of none, and its owner fails below, named.
    const bool send_back = !own(kept_);
    const bool fetch = !own(comm_.rank());
    std::optional<MemorySnapshot::SlotCopy> slot;
    if (send_back && replica_) slot = replica_->verified_slot(step);
    if (slot && slot->bytes != capacity_of(kept_)) slot.reset();
    int64_t out[3] = {slot ? step : -1, slot ? static_cast<int64_t>(slot->bytes) : 0,
                      slot ? static_cast<int64_t>(slot->checksum) : 0};
    int64_t in[3] = {-1, 0, 0};
    std::vector<std::unique_ptr<Work>> works;
    works.push_back(comm_.recv(in, sizeof in, fetch ? keeper_ : -1));
    works.push_back(comm_.send(out, sizeof out, send_back ? kept_ : -1));
    for (std::unique_ptr<Work>& w : works) w->wait();
    works.clear();
    const bool coming = fetch && in[0] == step && static_cast<size_t>(in[1]) == capacity();
    if (coming) {
      if (!snapshot_) snapshot_ = MemorySnapshot::create(name_, owner_, capacity(), home_);
      post_pieces(works, /*send=*/false, snapshot_->begin_receive(capacity()), capacity(), keeper_);
    }
    if (slot) post_pieces(works, /*send=*/true, const_cast<char*>(slot->data), slot->bytes, kept_);
    for (std::unique_ptr<Work>& w : works) w->wait();
    if (coming) snapshot_->commit_received(step, capacity(), static_cast<uint64_t>(in[2]));
    if (fetch && !coming) {
      fetched = false;
      why = "not in its own segment, and its keeper, rank " + std::to_string(keeper_) +
            ", holds no verified replica of it";
    }
  }
  bool ok = false;
  const std::vector<SnapshotPart> parts = host_parts();
  if (fetched && snapshot_ && snapshot_->restore(step, parts, &why)) {
    ok = meta_[0] == step && meta_[2] >= 0 && static_cast<size_t>(meta_[2]) <= kMemoryMaxSkipped;
    if (!ok) why = "its record of the step does not match";
  }
  // Which ranks failed, for every rank's message; each failing rank says why in its own log,
  // the one place its reason reaches (rank 0's message carries only its own).
  std::vector<double> failed(static_cast<size_t>(comm_.size()), 0.0);
  failed[static_cast<size_t>(comm_.rank())] = ok ? 0.0 : 1.0;
  comm_.all_gather(failed.data(), std::vector<size_t>(failed.size(), 1), DType::kFloat64)->wait();
  std::string ranks;
  int named = 0, more = 0;  // the first 8 named, the rest counted: a line, not a page
  for (size_t r = 0; r < failed.size(); ++r) {
    if (failed[r] == 0) continue;
    if (named++ < 8) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    } else {
      ++more;
    }
  }
  if (more > 0) ranks += " and " + std::to_string(more) + " more";
  if (!ranks.empty()) {
    const std::string what = "in-memory checkpoint of step " + std::to_string(step) +
                             ": not restored on rank" + (named == 1 ? " " : "s ") + ranks;
    if (!ok) {
      std::fprintf(stderr, "ringmaster: [rank %d] %s: this rank: %s\n", comm_.rank(), what.c_str(),
                   why.c_str());
      std::fflush(stderr);
    }
    throw MemoryRestoreError(what + (ok ? " (why: in each one's log)" : "; this rank: " + why));
  }
  if (!compute_.host_accessible()) {
    const float* src = staging_.data();
    for (const ShardedState::LocalPart& p : state_.own_slices()) {
      compute_.upload(p.data, src, p.floats * sizeof(float));
      src += p.floats;
    }
  }
  state_.finish_slice_restore(meta_[1]);
  Restored restored;
  restored.skipped_batches.assign(meta_.begin() + 3, meta_.begin() + 3 + meta_[2]);
  restored.train_windows = static_cast<uint64_t>(meta_[kMemoryTrainWindowsWord]);
  restored.train_fingerprint = static_cast<uint64_t>(meta_[kMemoryTrainFingerprintWord]);
  return restored;
}

void MemoryCheckpoints::discard() {
  try {
    finish_exchange();
  } catch (const std::exception&) {
    // The segments go anyway.
  }
  snapshot_.reset();
  MemorySnapshot::remove(name_);
  if (ring_.on()) {
    replica_.reset();
    MemorySnapshot::remove(replica_name_);
  }
}

}  // namespace rm
