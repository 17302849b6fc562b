#include "worker/memory_checkpoints.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace rm {
namespace {

// The meta part: steps done, optimizer steps, the number of skipped batches, then those.
constexpr size_t kMetaWords = 8192;
constexpr size_t kMaxSkipped = kMetaWords - 3;

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

MemoryCheckpoints::MemoryCheckpoints(const JobConfig& job, ShardedState& state, Compute& compute,
                                     Communicator& host_comm)
    : job_(job), state_(state), compute_(compute), comm_(host_comm), meta_(kMetaWords, 0) {
  const std::string dir =
      std::filesystem::absolute(job.run_dir).lexically_normal().string();
  name_ = memory_snapshot_name(hash_text(dir), comm_.rank());
  for (const ShardedState::LocalPart& p : state_.own_slices()) floats_ += p.floats;
  owner_ = hash_text(dir + "|rank " + std::to_string(comm_.rank()) + " of " +
                     std::to_string(comm_.size()) + "|shard " + choice_name(job.parallel.shard) + "|floats " +
                     std::to_string(floats_));
}

size_t MemoryCheckpoints::capacity() const {
  return kMetaWords * sizeof(int64_t) + floats_ * sizeof(float);
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

void MemoryCheckpoints::save(int64_t steps_done, const std::vector<int64_t>& skipped_batches) {
  if (skipped_batches.size() > kMaxSkipped) return;  // thousands of rollbacks: disk only
  std::fill(meta_.begin(), meta_.end(), 0);
  meta_[0] = steps_done;
  meta_[1] = state_.optimizer_steps();
  meta_[2] = static_cast<int64_t>(skipped_batches.size());
  std::copy(skipped_batches.begin(), skipped_batches.end(), meta_.begin() + 3);
  const std::vector<SnapshotPart> parts = host_parts();
  if (!compute_.host_accessible()) {
    float* dst = staging_.data();
    for (const ShardedState::LocalPart& p : state_.own_slices()) {
      compute_.download(dst, p.data, p.floats * sizeof(float));
      dst += p.floats;
    }
  }
  if (!snapshot_) snapshot_ = MemorySnapshot::create(name_, owner_, capacity());
  snapshot_->save(steps_done, parts);
}

MemoryCheckpoints::Agreed MemoryCheckpoints::agree_on_step() {
  std::string why = "no segment";
  if (!snapshot_) {
    if (std::optional<MemorySnapshot> s = MemorySnapshot::open(name_, owner_, capacity(), &why)) {
      snapshot_ = std::move(*s);
    }
  }
  std::string skipped;  // this rank's slots passed over, and why
  const size_t R = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  std::vector<double> held(2 * R, -1.0);
  if (snapshot_) {
    int n = 0;
    for (const MemorySnapshot::SlotReport& r : snapshot_->verify()) {
      if (r.usable && n < 2) {
        held[2 * me + n++] = static_cast<double>(r.step);
      } else if (!r.usable && r.why != "never written") {
        skipped += "; slot " + std::to_string(r.slot) + " skipped: " + r.why;
      }
    }
  } else {
    skipped = "; " + why;
  }
  comm_.all_gather(held.data(), std::vector<size_t>(R, 2), DType::kFloat64)->wait();

  Agreed a;
  for (int i = 0; i < 2; ++i) {  // rank 0's steps, newest first: the first every rank holds
    const double c = held[i];
    if (c < 0) continue;
    bool everywhere = true;
    for (size_t r = 0; r < R && everywhere; ++r) {
      everywhere = held[2 * r] == c || held[2 * r + 1] == c;
    }
    if (everywhere && (!a.step || static_cast<int64_t>(c) > *a.step)) {
      a.step = static_cast<int64_t>(c);
    }
  }
  a.account = "in memory: ";
  for (size_t r = 0; r < R; ++r) {
    a.account += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " holds " +
                 held_text(&held[2 * r]);
  }
  a.account += skipped.empty() ? "" : " (rank 0" + skipped + ")";
  return a;
}

std::vector<int64_t> MemoryCheckpoints::restore(int64_t step) {
  std::string why = "no segment";
  bool ok = false;
  const std::vector<SnapshotPart> parts = host_parts();
  if (snapshot_ && snapshot_->restore(step, parts, &why)) {
    ok = meta_[0] == step && meta_[2] >= 0 && static_cast<size_t>(meta_[2]) <= kMaxSkipped;
    if (!ok) why = "its record of the step does not match";
  }
  double failed = ok ? 0.0 : 1.0;
  comm_.all_reduce(&failed, 1, DType::kFloat64, ReduceOp::kSum)->wait();
  if (failed > 0) {
    throw std::runtime_error("in-memory checkpoint of step " + std::to_string(step) +
                             ": not restored on " + std::to_string(static_cast<int>(failed)) +
                             " rank(s)" + (ok ? "" : "; this rank: " + why));
  }
  if (!compute_.host_accessible()) {
    const float* src = staging_.data();
    for (const ShardedState::LocalPart& p : state_.own_slices()) {
      compute_.upload(p.data, src, p.floats * sizeof(float));
      src += p.floats;
    }
  }
  state_.finish_slice_restore(meta_[1]);
  return std::vector<int64_t>(meta_.begin() + 3, meta_.begin() + 3 + meta_[2]);
}

void MemoryCheckpoints::discard() {
  snapshot_.reset();
  MemorySnapshot::remove(name_);
}

}  // namespace rm
