#include "worker/sharded_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>


namespace rm {

namespace {

// Floats a backend the host cannot address is filled with at a time: 64 MiB of host memory
// whatever the model's size (a whole model a rank in host memory was 4 bytes a parameter no
// memory estimate counted: 280 GB a rank for a 70B model).
constexpr size_t kHostPiece = size_t{16} << 20;

// `dst` (n floats of compute's memory) filled by fill(out, at, count), which writes elements
// [at, at + count) of dst's range to out: straight into dst where the host addresses it, else in
// pieces through one host buffer.
template <typename Fill>
void fill_backend(Compute& compute, float* dst, size_t n, const Fill& fill) {
  if (compute.host_accessible()) {
    fill(dst, size_t{0}, n);
    return;
  }
  std::vector<float> host(std::min(n, kHostPiece));
  for (size_t at = 0; at < n; at += kHostPiece) {
    const size_t count = std::min(kHostPiece, n - at);
    fill(host.data(), at, count);
    compute.upload(dst + at, host.data(), count * sizeof(float));  // host reusable on return
  }
}

}  // namespace

ShardedState::ShardedState(const JobConfig& job, const Model& model, Communicator& comm,
                           Communicator* host_comm)
    : job_(job), model_(model), compute_(model.compute()), comm_(comm),
      host_comm_(host_comm != nullptr ? *host_comm : comm), mode_(job.parallel.shard),
      bf16_(model.precision() == Precision::kBf16),
      bf16_wire_(job.parallel.grad_reduce == Precision::kBf16) {
  const size_t total = model.layout().size();
  full_params_ = keeps_all_params(mode_);
  full_grads_ = keeps_all_grads(mode_);
  shard_counts_ = shard_counts(total, comm.size());
  shard_begin_ = shard_offset(shard_counts_, comm.rank());
  shard_end_ = shard_begin_ + shard_counts_[comm.rank()];
  const size_t shard = shard_end_ - shard_begin_;

  params_ = allocate(full_params_ ? total : shard);
  if (bf16_) {
    // Not communicated except by ZeRO-3's unit gathers, which copy into scratch first.
    bf16_params_ = DeviceArray<bf16>(compute_, params_.size());
  }
  grads_ = allocate(full_grads_ ? total : shard);
  if (bf16_wire_ && full_grads_) {
    wire_ = reinterpret_cast<bf16*>(allocate((total + 1) / 2).data());
    scratch_capacity_ += (total + 1) / 2;
  }
  if (mode_ == ShardMode::kNone) {
    optimizer_ = std::make_unique<AdamWOptimizer>(job.optimizer, model.layout(), compute_);
  } else {
    optimizer_ = std::make_unique<AdamWOptimizer>(job.optimizer, model.layout(), compute_,
                                                  shard_begin_, shard_end_);
  }
  const auto& units = model.units();
  unit_params_.assign(units.size(), nullptr);
  unit_grads_.assign(units.size(), nullptr);

  // Buckets for none/optimizer: whole units from the last one down, each bucket closed once it
  // reaches bucket_mb (a unit larger than that is a bucket of its own).
  const size_t bucket_elems =
      std::max<size_t>(1, static_cast<size_t>(job.parallel.bucket_mb * 1024 * 1024 / 4));
  size_t end = total;
  for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
    if (end - units[u].begin >= bucket_elems || u == 0) {
      buckets_.push_back({units[u].begin, end, u});
      end = units[u].begin;
    }
  }
  // Last, so that the buffers above keep their allocation order (the ordering tests name them).
  scalars_ = static_cast<StepScalars*>(comm_.allocate(sizeof(StepScalars)));
}

ShardedState::~ShardedState() {
  // Reductions still in flight as an error unwinds (a token past the vocabulary found as the
  // next micro-batch is filled, while the last one's reduce-scatters run) are left to the
  // communicator: every buffer they touch is its own (allocate(): grads, scratch, the bf16
  // wire) and outlives this, and a dropped Work stays in its queue. The error then reaches
  // rank_main's handlers, which end the job with its cause and exit code; aborting here, as it
  // unwinds, ended every such job with exit 1 and "a reduction in flight", the cause unsaid.
  // Only a destruction with work in flight and no error is a bug of ours, said as one.
  if (std::uncaught_exceptions() > 0) return;
  for (Pending& p : pending_) {
    if (p.work && !p.work->test()) comm_.abort("training stopped with a reduction in flight");
  }
}

ShardedState::Buffer ShardedState::allocate(size_t floats) {
  // Zero-filled, owned by the communicator (and so freed with it).
  return {static_cast<float*>(comm_.allocate(std::max<size_t>(1, floats) * sizeof(float))),
          floats};
}

float* ShardedState::staging() {
  if (staging_.compute == nullptr) {
    const size_t shard = shard_end_ - shard_begin_;
    staging_.p = static_cast<float*>(compute_.allocate_host(3 * shard * sizeof(float)));
    staging_.compute = &compute_;
  }
  return staging_.p;
}

void ShardedState::init_params(uint64_t seed) {
  // Counter-based init: any rank makes any slice, so each makes only what it holds (ZeRO-3: its
  // shard).
  load_params(
      [&](size_t begin, size_t end, float* dst) { model_.init_params(dst, begin, end, seed); });
}

void ShardedState::load_params(const ParamReader& read) {
  const size_t begin = full_params_ ? 0 : shard_begin_;
  fill_backend(compute_, params_.data(), params_.size(), [&](float* out, size_t at, size_t count) {
    read(begin + at, begin + at + count, out);
  });
  refresh_compute_params();
}

void ShardedState::poison_first_param() {
  if (params_.size() == 0) return;
  const float nan = std::nanf("");
  compute_.upload(params_.data(), &nan, sizeof nan);
  refresh_compute_params();
}

std::vector<size_t> ShardedState::counts_in(size_t begin, size_t end) const {
  std::vector<size_t> counts(shard_counts_.size());
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const size_t lo = std::max(begin, offset), hi = std::min(end, offset + shard_counts_[r]);
    counts[r] = hi > lo ? hi - lo : 0;
    offset += shard_counts_[r];
  }
  return counts;
}

float* ShardedState::take_scratch(size_t n) {
  // Two constraints from the communicator: allocate() is collective, and a collective's buffers
  // must be the same allocate() block on every rank. Which buffers are free at a given moment
  // depends on when each rank's reductions finished, so the choice must not: candidates are
  // the free buffers AND those held by reductions in flight (the same set on every rank, as it
  // follows program order); take the smallest that fits (ties: the oldest), waiting for its
  // reduction if need be; allocate only when none fits. After the first step this never
  // allocates.
  const Scratch* best = nullptr;
  auto consider = [&](const Scratch& s) {
    if (s.n >= n && (!best || s.n < best->n || (s.n == best->n && s.id < best->id))) best = &s;
  };
  for (const Scratch& s : scratch_free_) consider(s);
  for (const Pending& p : pending_) {
    if (!p.scratch) continue;
    for (const Scratch& s : scratch_in_use_) {
      if (s.p == p.scratch) consider(s);
    }
  }
  float* chosen = best ? best->p : nullptr;
  if (!chosen) {
    chosen = allocate(n).data();
    scratch_capacity_ += n;
    scratch_in_use_.push_back({chosen, n, next_scratch_id_++});
    return chosen;
  }
  // Wait (in issue order) until the chosen buffer's reduction, if any, has completed.
  auto is_free = [&] {
    for (const Scratch& s : scratch_free_) {
      if (s.p == chosen) return true;
    }
    return false;
  };
  while (!is_free()) {
    pending_.front().work->wait();
    complete(pending_.front());
    pending_.pop_front();
  }
  for (auto it = scratch_free_.begin(); it != scratch_free_.end(); ++it) {
    if (it->p == chosen) {
      scratch_in_use_.push_back(*it);
      scratch_free_.erase(it);
      break;
    }
  }
  return chosen;
}

void ShardedState::give_back_scratch(float* p) {
  for (auto it = scratch_in_use_.begin(); it != scratch_in_use_.end(); ++it) {
    if (it->p == p) {
      scratch_free_.push_back(*it);
      scratch_in_use_.erase(it);
      return;
    }
  }
  throw std::logic_error("ShardedState: scratch buffer returned twice");
}

// ---- ParamAccess ---------------------------------------------------------------------------

const void* ShardedState::acquire_params(int u) {
  if (progress_) progress_->beat();
  trace_unit(u);
  const ParamUnit& unit = model_.units()[u];
  const size_t esize = compute_param_bytes();
  if (full_params_) return compute_params() + unit.begin * esize;
  // ZeRO-3: this unit's gather was issued one unit ago (prefetched), or is issued now.
  if (recording_) fetch_order_.push_back(u);
  Gather current;
  if (prefetch_.unit == u) {
    current = std::move(prefetch_);
    prefetch_ = Gather();
  } else {
    drop_prefetch();
    current = start_gather(u);
  }
  // Then the next unit of the recorded order, to cross the links while this one computes: at
  // most two units are gathered at once. Off the recorded order (evaluation, a model that
  // changed its mind) nothing is prefetched until the next micro-batch; every rank sees the
  // same order, so every rank issues the same gathers.
  if (cursor_ < fetch_order_.size() && !recording_ && fetch_order_[cursor_] == u) {
    if (++cursor_ < fetch_order_.size()) prefetch_ = start_gather(fetch_order_[cursor_]);
  } else {
    cursor_ = kNoCursor;
  }
  current.work->wait();
  if (trace_) trace_->comm_end(current.trace_id);
  unit_params_[u] = current.buf;
  return current.buf;
}

ShardedState::Gather ShardedState::start_gather(int u) {
  // Gathered in the compute precision (bf16 gathers move half the bytes).
  const ParamUnit& unit = model_.units()[u];
  const size_t esize = compute_param_bytes();
  const char* mine = compute_params();  // this rank's shard
  Gather g;
  g.unit = u;
  g.buf = take_scratch((unit.size() * esize + sizeof(float) - 1) / sizeof(float));
  char* bytes = reinterpret_cast<char*>(g.buf);
  const size_t lo = std::max(unit.begin, shard_begin_), hi = std::min(unit.end, shard_end_);
  if (hi > lo) {
    compute_.copy(bytes + (lo - unit.begin) * esize, mine + (lo - shard_begin_) * esize,
                  (hi - lo) * esize);
  }
  g.trace_id = trace_ ? trace_->comm_begin("all-gather unit", u, unit.size() * esize) : 0;
  g.work = comm_.all_gather(g.buf, counts_in(unit.begin, unit.end),
                            bf16_ ? DType::kBFloat16 : DType::kFloat32);
  return g;
}

void ShardedState::drop_prefetch() {
  if (!prefetch_.work) return;
  prefetch_.work->wait();
  if (trace_) trace_->comm_end(prefetch_.trace_id);
  give_back_scratch(prefetch_.buf);
  prefetch_ = Gather();
}

const char* ShardedState::compute_params() const {
  return bf16_ ? reinterpret_cast<const char*>(bf16_params_.data())
               : reinterpret_cast<const char*>(params_.data());
}

void ShardedState::refresh_compute_params() {
  // The bf16 copy has the shape of the master (full, or this rank's shard under ZeRO-3).
  if (bf16_) compute_.cast(bf16_params_.data(), params_.data(), params_.size());
}

void ShardedState::release_params(int u) {
  if (full_params_) return;
  give_back_scratch(unit_params_[u]);
  unit_params_[u] = nullptr;
  if (prefetch_.work) comm_.progress();  // the next unit's gather moves between layers
}

float* ShardedState::acquire_grads(int u) {
  if (progress_) progress_->enter(Phase::kBackward);
  trace_unit(u);
  const ParamUnit& unit = model_.units()[u];
  if (full_grads_) return grads_.data() + unit.begin;
  float* buf = take_scratch(unit.size());
  compute_.zero(buf, unit.size() * sizeof(float));
  unit_grads_[u] = buf;
  return buf;
}

void ShardedState::release_grads(int u) {
  const auto t0 = std::chrono::steady_clock::now();
  trace_unit(u);
  if (full_grads_) {
    // Launch every bucket whose last unit this was (buckets are ordered high to low).
    if (communicate_ && job_.parallel.overlap) {
      while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].lowest_unit >= u) {
        launch_bucket(buckets_[next_bucket_++]);
      }
    }
  } else {
    // ZeRO-2/3: reduce-scatter the unit's scratch gradients now; fold our slice in later.
    const ParamUnit& unit = model_.units()[u];
    Pending p;
    p.unit = u;
    p.scratch = unit_grads_[u];
    unit_grads_[u] = nullptr;
    if (bf16_wire_) {
      // Round into a wire buffer; the fp32 scratch is free again once the cast is queued.
      float* wire = take_scratch((unit.size() + 1) / 2);
      compute_.cast(reinterpret_cast<bf16*>(wire), p.scratch, unit.size());
      give_back_scratch(p.scratch);
      p.scratch = wire;
      p.wire = true;
    }
    if (trace_) {
      p.trace_id = trace_->comm_begin("reduce-scatter unit", u,
                                      unit.size() * (p.wire ? sizeof(bf16) : sizeof(float)));
    }
    p.work = comm_.reduce_scatter(p.scratch, counts_in(unit.begin, unit.end),
                                  p.wire ? DType::kBFloat16 : DType::kFloat32, ReduceOp::kSum);
    pending_.push_back(std::move(p));
    ++overlap_.reductions;
    ++overlap_.started_in_backward;
  }
  drain(/*wait_all=*/false);
  overlap_.comm_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- Step ----------------------------------------------------------------------------------

void ShardedState::begin_step() {
  compute_.zero(grads_.data(), grads_.size() * sizeof(float));
  overlap_ = OverlapStats();
}

void ShardedState::begin_micro_batch(bool last_of_step) {
  // ZeRO-3: the first micro-batch records the order units are acquired in; later ones follow it.
  if (!full_params_) {
    recording_ = fetch_order_.empty();
    cursor_ = 0;
  }
  communicate_ = last_of_step;
  next_bucket_ = 0;
  in_backward_ = true;
}

void ShardedState::launch_bucket(const Bucket& b) {
  Pending p;
  void* buf = grads_.data() + b.begin;
  DType type = DType::kFloat32;
  if (bf16_wire_) {
    compute_.cast(wire_ + b.begin, grads_.data() + b.begin, b.end - b.begin);
    buf = wire_ + b.begin;
    type = DType::kBFloat16;
    p.wire = true;
    p.begin = b.begin;
    p.end = b.end;
  }
  if (trace_) {
    p.trace_id = trace_->comm_begin(mode_ == ShardMode::kNone ? "all-reduce bucket" : "reduce-scatter bucket",
                                    static_cast<int>(&b - buckets_.data()),
                                    (b.end - b.begin) * dtype_size(type));
  }
  if (mode_ == ShardMode::kNone) {
    p.work = comm_.all_reduce(buf, b.end - b.begin, type, ReduceOp::kSum);
  } else {
    p.work = comm_.reduce_scatter(buf, counts_in(b.begin, b.end), type, ReduceOp::kSum);
  }
  pending_.push_back(std::move(p));
  ++overlap_.reductions;
  if (in_backward_) ++overlap_.started_in_backward;
}

void ShardedState::complete(Pending& p) {
  if (trace_) trace_->comm_end(p.trace_id);
  if (p.unit < 0) {
    if (!p.wire) return;  // a bucket reduced in place
    // Widen the reduced bf16 values back: the whole bucket (all-reduce) or this rank's part.
    const bool all = mode_ == ShardMode::kNone;
    const size_t lo = all ? p.begin : std::max(p.begin, shard_begin_);
    const size_t hi = all ? p.end : std::min(p.end, shard_end_);
    if (hi > lo) compute_.cast(grads_.data() + lo, wire_ + lo, hi - lo);
    return;
  }
  const ParamUnit& unit = model_.units()[p.unit];
  const size_t lo = std::max(unit.begin, shard_begin_), hi = std::min(unit.end, shard_end_);
  if (hi > lo) {
    float* acc = grads_.data() + (lo - shard_begin_);
    if (p.wire) {
      compute_.add_inplace(acc, reinterpret_cast<const bf16*>(p.scratch) + (lo - unit.begin),
                           hi - lo);
    } else {
      compute_.add_inplace(acc, p.scratch + (lo - unit.begin), hi - lo);
    }
  }
  give_back_scratch(p.scratch);
}

void ShardedState::drain(bool wait_all) {
  comm_.progress();
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (wait_all) {
      p.work->wait();
    } else if (!p.work->test()) {
      break;
    }
    complete(p);
    if (in_backward_) ++overlap_.finished_in_backward;
    pending_.pop_front();
  }
}

void ShardedState::finish_backward() {
  in_backward_ = false;
  recording_ = false;
  cursor_ = kNoCursor;
  drop_prefetch();  // none should be left; the parameters change next
  if (full_grads_ && communicate_) {
    // Without overlap (or for buckets not reached), reduce now.
    while (next_bucket_ < buckets_.size()) launch_bucket(buckets_[next_bucket_++]);
  }
  drain(/*wait_all=*/true);
}

double ShardedState::grad_norm() {
  if (mode_ == ShardMode::kNone) {
    // Every rank holds the same reduced gradient: no communication needed.
    return std::sqrt(compute_.sum_squares(grads_.data(), grads_.size()));
  }
  const float* mine = full_grads_ ? grads_.data() + shard_begin_ : grads_.data();
  double sq = compute_.sum_squares(mine, shard_end_ - shard_begin_);
  host_comm_.all_reduce(&sq, 1, DType::kFloat64, ReduceOp::kSum)->wait();
  return std::sqrt(sq);
}

void ShardedState::queue_optimizer_step(double lr, const StepLimits& limits) {
  // The scalars the update is guarded by, summed over the ranks where each holds a part: the
  // loss always (each rank's micro-batches differ), the gradient's squares only where the
  // gradient is sharded (under mode none every rank sums the same reduced gradient).
  double* const sq = &scalars_->grad_sq;
  int reduced = 1;
  if (mode_ == ShardMode::kNone) {
    compute_.sum_squares_into(sq, grads_.data(), grads_.size());
  } else {
    const float* mine = full_grads_ ? grads_.data() + shard_begin_ : grads_.data();
    compute_.sum_squares_into(sq, mine, shard_end_ - shard_begin_);
    reduced = 2;
  }
  if (comm_.size() > 1) {
    // On nccl a wait for the device, as the gradients' reduction already had one; on one rank
    // (where a GPU step has no other) nothing.
    comm_.all_reduce(scalars_, reduced, DType::kFloat64, ReduceOp::kSum)->wait();
  }

  // Where the optimizer updates every master this rank computes with (replicated: all of them;
  // ZeRO-3: its shard, which is all its bf16 copy holds), it writes the bf16 copy in the same
  // pass; the rest is left as it was, and so still the rounding of an unchanged master.
  const bool same_shape = mode_ == ShardMode::kNone || !full_params_;
  bf16* rounded = bf16_ && same_shape ? bf16_params_.data() : nullptr;
  if (mode_ == ShardMode::kNone) {
    optimizer_->queue_step(params_.data(), grads_.data(), lr, scalars_, rounded, limits);
  } else {
    float* p = full_params_ ? params_.data() + shard_begin_ : params_.data();
    const float* g = full_grads_ ? grads_.data() + shard_begin_ : grads_.data();
    optimizer_->queue_step(p, g, lr, scalars_, rounded, limits);
    // The fp32 masters are gathered, so every rank keeps the whole master (its checkpoint
    // slice and the final weights read it), then rounded to the compute copy. After a skipped
    // update this gathers what every rank already holds.
    if (full_params_) {
      const uint64_t traced =
          trace_ ? trace_->comm_begin("all-gather params", 0, params_.size() * sizeof(float)) : 0;
      comm_.all_gather(params_.data(), shard_counts_, DType::kFloat32)->wait();
      if (trace_) trace_->comm_end(traced);
    }
  }
  if (rounded == nullptr) refresh_compute_params();
}

ShardedState::StepOutcome ShardedState::finish_optimizer_step() {
  StepScalars host;
  compute_.download(&host, scalars_, sizeof(host));
  StepOutcome out;
  out.grad_norm = step_grad_norm(host);
  out.loss_sum = host.loss_sum;
  out.applied = optimizer_->finish_step(host);
  return out;
}

ShardedState::StepOutcome ShardedState::optimizer_step(double lr) {
  queue_optimizer_step(lr);
  return finish_optimizer_step();
}

void ShardedState::stream_params(const ParamSink& sink) {
  const size_t total = model_.layout().size();
  std::exception_ptr failed;
  std::vector<float> host;  // one piece, where the host cannot read the compute's memory
  const auto deliver = [&](const float* data, size_t count) {
    if (!sink || failed) return;
    try {
      if (!compute_.host_accessible()) {
        if (host.size() < count) host.resize(count);
        compute_.download(host.data(), data, count * sizeof(float));
        data = host.data();
      }
      sink(data, count);
    } catch (...) {
      failed = std::current_exception();
    }
  };
  if (full_params_) {
    const size_t piece = compute_.host_accessible() ? total : kDownloadPiece;
    for (size_t at = 0; at < total; at += piece) {
      deliver(params_.data() + at, std::min(piece, total - at));
    }
  } else {
    // ZeRO-3: unit by unit through the scratch pool, so the compute's memory (a GPU's) never
    // holds a second whole copy of the model either.
    drop_prefetch();
    for (const ParamUnit& unit : model_.units()) {
      float* buf = take_scratch(unit.size());
      const size_t lo = std::max(unit.begin, shard_begin_), hi = std::min(unit.end, shard_end_);
      if (hi > lo) {
        compute_.copy(buf + (lo - unit.begin), params_.data() + (lo - shard_begin_),
                      (hi - lo) * sizeof(float));
      }
      comm_.all_gather(buf, counts_in(unit.begin, unit.end), DType::kFloat32)->wait();
      deliver(buf, unit.size());
      give_back_scratch(buf);
    }
  }
  if (failed) std::rethrow_exception(failed);
}

std::vector<float> ShardedState::full_params() {
  std::vector<float> all(model_.layout().size());
  size_t at = 0;
  stream_params([&](const float* data, size_t count) {
    std::memcpy(all.data() + at, data, count * sizeof(float));
    at += count;
  });
  return all;
}

ShardedState::CheckpointView ShardedState::checkpoint_view() {
  const size_t shard = shard_end_ - shard_begin_;
  const float* p = full_params_ ? params_.data() + shard_begin_ : params_.data();
  const size_t o = shard_begin_ - optimizer_->begin();
  const float* m = optimizer_->m() + o;
  const float* v = optimizer_->v() + o;
  CheckpointView view;
  if (compute_.host_accessible()) {
    view.ready = [] {};
  } else {
    // Copies of the three slices, downloaded on the side stream while compute continues; the
    // checkpoint writer's thread waits for them, not this one.
    float* host = staging();
    compute_.download_async(host, p, shard * sizeof(float));
    compute_.download_async(host + shard, m, shard * sizeof(float));
    compute_.download_async(host + 2 * shard, v, shard * sizeof(float));
    view.ready = compute_.downloads_fence();
    p = host;
    m = host + shard;
    v = host + 2 * shard;
  }
  view.slices = {{"params", shard_begin_, shard_end_, p},
                 {"adam_m", shard_begin_, shard_end_, m},
                 {"adam_v", shard_begin_, shard_end_, v}};
  return view;
}

void ShardedState::restore(CheckpointReader& reader, int64_t optimizer_steps) {
  const size_t pbegin = full_params_ ? 0 : shard_begin_;
  const size_t obegin = optimizer_->begin(), oend = optimizer_->end();
  const auto read = [&](const char* buffer, float* dst, size_t begin, size_t n) {
    fill_backend(compute_, dst, n, [&](float* out, size_t at, size_t count) {
      reader.read_range(buffer, begin + at, begin + at + count, out);
    });
  };
  read("params", params_.data(), pbegin, params_.size());
  read("adam_m", optimizer_->m(), obegin, oend - obegin);
  read("adam_v", optimizer_->v(), obegin, oend - obegin);
  optimizer_->set_steps_taken(optimizer_steps);
  refresh_compute_params();
}

std::vector<ShardedState::LocalPart> ShardedState::own_slices() {
  const size_t shard = shard_end_ - shard_begin_;
  const size_t o = shard_begin_ - optimizer_->begin();
  return {{params_.data() + (full_params_ ? shard_begin_ : 0), shard},
          {optimizer_->m() + o, shard},
          {optimizer_->v() + o, shard}};
}

void ShardedState::finish_slice_restore(int64_t optimizer_steps) {
  if (full_params_) comm_.all_gather(params_.data(), shard_counts_, DType::kFloat32)->wait();
  if (mode_ == ShardMode::kNone) {  // the optimizer updates every element on every rank
    comm_.all_gather(optimizer_->m(), shard_counts_, DType::kFloat32)->wait();
    comm_.all_gather(optimizer_->v(), shard_counts_, DType::kFloat32)->wait();
  }
  optimizer_->set_steps_taken(optimizer_steps);
  refresh_compute_params();
}

MemoryPlan ShardedState::memory_plan() const {
  MemoryPlan m;
  m.param_bytes = params_.size() * (sizeof(float) + (bf16_ ? sizeof(bf16) : 0));
  m.grad_bytes = grads_.size() * sizeof(float);
  m.optimizer_bytes = 2 * (optimizer_->end() - optimizer_->begin()) * sizeof(float);
  m.scratch_bytes = scratch_capacity_ * sizeof(float);
  return m;
}

}  // namespace rm
