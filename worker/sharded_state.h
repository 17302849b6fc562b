// One rank's parameters, gradients and optimizer state under a parallel.shard mode, and the
// gradient synchronisation between ranks. It is the ParamAccess the model runs against.
//
// Every rank owns one contiguous slice (shard) of the flat layout: shard_counts(total, world).
//
//   mode       params      grads                     Adam moments   after backward
//   none       full        full                      full           all-reduce (buckets)
//   optimizer  full        full                      shard          reduce-scatter (buckets),
//                                                                   update shard, all-gather
//   gradients  full        shard (+ unit scratch)    shard          reduce-scatter per unit,
//                                                                   update shard, all-gather
//   full       shard (+ unit gathers)  shard (+ scratch)  shard     reduce-scatter per unit;
//                                                                   params gathered per unit
//                                                                   before use, freed after;
//                                                                   the next unit prefetched
//
// ZeRO-3 prefetch: the first training micro-batch records the order the model acquires units in
// (forward, then backward); afterwards, acquiring a unit issues the gather of the next one in
// that order, which crosses the links while the current one computes -- at most two units
// gathered at once. Evaluation and anything off the recorded order gather on demand.
//
// Overlap: gradients are reduced while backward runs. none/optimizer group units into buckets
// of parallel.bucket_mb in reverse layer order and start a bucket's reduction when its last
// unit is released; gradients/full reduce-scatter each unit as it is released. Pending work is
// progressed on every release (Open MPI makes no progress on its own: see communicator.h).
// With gradient accumulation only the last micro-batch communicates in none/optimizer; ZeRO-2/3
// keep no full gradient buffer, so they reduce-scatter every micro-batch (as DeepSpeed does).
//
// Gradient reduction in bf16 (parallel.grad_reduce: bf16, any compute precision): gradients are
// computed and kept in fp32; each bucket or unit is rounded into a bf16 "wire" copy just before
// its reduction is issued (the same point as the fp32 reduction, so overlap is unchanged), the
// communicator sums the ranks' bf16 values (the MPI backends in fp32, rounding the sum once;
// NCCL in bf16 as its ring or tree goes, rounding at each of its up to N-1 hops: never measured,
// as NCCL has not run on 2+ ranks), and completion widens the reduced slice back into the fp32
// gradients. Half the bytes cross the links. Buckets use one wire buffer laid out as the
// gradients (so buckets in flight never share memory); ZeRO-2/3 units take their wire buffer
// from the scratch pool and return the fp32 unit scratch at once.
//
// Memory: parameters, gradients, optimizer state and scratch live in the memory of the model's
// Compute (kernels/compute.h), and communicated buffers come from comm.allocate(), which must
// give memory of the same kind (host for mpi with the cpu compute, device for nccl with cuda).
// The step's guard scalars (loss, gradient sum of squares) are reduced over comm in the compute's
// memory; host scalars (grad_norm(), for tests) over host_comm (the same object on the cpu).
//
// Not thread-safe; every rank must make the same calls in the same order (they issue
// collectives).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "model/adamw_optimizer.h"
#include "model/model.h"
#include "observe/step_progress.h"
#include "observe/trace_recorder.h"

namespace rm {

// Evidence of overlap for one step: how many gradient reductions were started, and finished,
// while backward was still running (the rest started or finished in finish_backward).
// comm_ms: time this rank spent inside communicator calls during backward (issuing, progressing
// and completing reductions: on one node the shared-memory engine moves the bytes in these
// calls, and waits there for slower peers).
struct OverlapStats {
  int reductions = 0, started_in_backward = 0, finished_in_backward = 0;
  double comm_ms = 0;
};

struct MemoryPlan {
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0, scratch_bytes = 0;
  size_t total() const { return param_bytes + grad_bytes + optimizer_bytes + scratch_bytes; }
};

class ShardedState final : public ParamAccess {
 public:
  // host_comm == nullptr: comm (which must then reduce host memory).
  ShardedState(const JobConfig& job, const Model& model, Communicator& comm,
               Communicator* host_comm = nullptr);
  ~ShardedState() override;

  // Initialises parameters from the seed (identically on every rank).
  void init_params(uint64_t seed);
  // Sets this rank's parameters (all, or its shard under ZeRO-3) from `read(begin, end, dst)`,
  // which fills elements [begin, end) of the flat buffer into host memory (model.init_from);
  // the optimizer's moments stay as they are. Not collective.
  using ParamReader = std::function<void(size_t begin, size_t end, float* dst)>;
  void load_params(const ParamReader& read);
  // Tests (RM_TEST_FAULT=nanweight): this rank's first parameter becomes NaN.
  void poison_first_param();

  // Call order per optimizer step: begin_step, then per micro-batch begin_micro_batch and the
  // model's forward_backward, then finish_backward, the step's loss into
  // step_scalars()->loss_sum (Model::queue_loss_copy), queue_optimizer_step and, once the host
  // wants the outcome, finish_optimizer_step.
  void begin_step();
  void begin_micro_batch(bool last_of_step);
  void finish_backward();
  // The scalars that guard this step's update (kernels/step_scalars.h), in the compute's memory
  // (allocated from comm, which reduces them). loss_sum is the caller's to write, each step.
  StepScalars* step_scalars() { return scalars_; }
  // Queues the update without waiting for the device on one rank: the gradient's sum of squares
  // into step_scalars(), the scalars summed over the ranks (ranks > 1: one all-reduce of one or
  // two doubles over comm, waited for), then AdamW, which leaves everything as it was when the
  // loss or the norm is not finite and clips by the global norm otherwise, and writes the bf16
  // copy; ZeRO-3 then gathers the masters. The same decision on every rank, from the same sums.
  // `limits`: also left as it was where the global loss sum or norm passes them (a spike).
  void queue_optimizer_step(double lr, const StepLimits& limits = {});
  // The host's one read of the step's scalars (a wait for the device): the global gradient norm
  // and whether the update ran (then optimizer_steps() counts it).
  struct StepOutcome {
    double grad_norm = 0;
    double loss_sum = 0;  // the device's global sum, what the update was decided by
    bool applied = false;
  };
  StepOutcome finish_optimizer_step();
  StepOutcome optimizer_step(double lr);  // both, at once (tests)
  // The global norm read now, on the host: for tests, not the step path.
  double grad_norm();
  int64_t optimizer_steps() const { return optimizer_->steps_taken(); }

  // The whole fp32 parameter buffer in order, piece by piece: `sink(data, count)` gets host
  // memory valid during the call, and the pieces tile [0, layout().size()). Collective: every
  // rank calls it (gathered unit by unit under ZeRO-3); ranks without a sink take part and get
  // nothing. The host holds no copy of the model for it: where the host reads the compute's
  // memory the pieces are the buffers themselves (or a gathered unit's scratch), else one piece
  // at a time is downloaded (at most max(kDownloadPiece, the largest unit)). If `sink` throws,
  // the exception is kept, the rest is still gathered (the peers wait in those gathers), and it
  // is rethrown at the end.
  using ParamSink = std::function<void(const float* data, size_t count)>;
  static constexpr size_t kDownloadPiece = kParamDownloadPiece;  // model/param_layout.h
  void stream_params(const ParamSink& sink);
  // The same into one host vector (tests). Collective too.
  std::vector<float> full_params();

  // Checkpointing: this rank's slice [shard_begin, shard_end) of "params", "adam_m" and
  // "adam_v" (every rank writes only its own slice, whatever the mode), and the restore of a
  // rank's state from any checkpoint (written by any number of ranks in any mode). The slices
  // are host memory, valid until the next optimizer_step: the buffers themselves where the host
  // can read them, else pinned staging copies still being downloaded on the side stream when
  // this returns -- `ready` (any thread may call it) returns once their bytes are there, and
  // must have returned before the next optimizer_step (Checkpointing::wait_staged sees to it).
  struct CheckpointView {
    std::vector<ShardSlice> slices;
    std::function<void()> ready;
  };
  CheckpointView checkpoint_view();
  size_t checkpoint_floats() const { return 3 * (shard_end_ - shard_begin_); }
  // Every rank's slice size (elements of each of the three tensors), in rank order.
  const std::vector<size_t>& slice_counts() const { return shard_counts_; }
  void restore(CheckpointReader& reader, int64_t optimizer_steps);
  // In-memory checkpoints keep what a disk checkpoint keeps of this rank: its slice
  // [shard_begin, shard_end) of the parameters and the Adam moments, whatever the mode (under
  // mode none every rank holds the same state, so each keeps a 1/R of it). own_slices() names
  // those three ranges in the compute's memory (device memory on cuda), to read after an
  // optimizer update or to write on a restore; finish_slice_restore() then gathers what the
  // mode holds beyond the slice -- every rank's parameters where it keeps them all, and the
  // whole moments under mode none -- sets the optimizer's step count and refreshes the compute
  // copies. Collective over the state's communicator.
  struct LocalPart {
    float* data;
    size_t floats;
  };
  std::vector<LocalPart> own_slices();
  void finish_slice_restore(int64_t optimizer_steps);

  ShardMode mode() const { return mode_; }
  MemoryPlan memory_plan() const;
  const OverlapStats& overlap_stats() const { return overlap_; }
  Communicator& comm() { return comm_; }
  // Beats `progress` once per parameter unit acquired, and marks the backward phase when the
  // first gradients are acquired (for the watchdog: a few relaxed stores per unit). Optional.
  void set_progress(StepProgress* progress) { progress_ = progress; }
  // Tells `trace` which unit the model works on and when each collective is issued and seen
  // complete (trace_recorder.h); null (the default): one pointer test per call.
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

  // ParamAccess
  const void* acquire_params(int unit) override;
  void release_params(int unit) override;
  float* acquire_grads(int unit) override;
  void release_grads(int unit) override;

 private:
  struct Bucket {
    size_t begin, end;
    int lowest_unit;  // launched when this unit's gradients are released
  };
  struct Pending {
    std::unique_ptr<Work> work;
    int unit = -1;          // ZeRO-2/3: the unit whose scratch gradients are being reduced
    float* scratch = nullptr;  // ZeRO-2/3: the reduced buffer (fp32, or bf16 on the wire)
    size_t begin = 0, end = 0;  // a bucket reduced in bf16: its range of the layout
    bool wire = false;          // reduced in bf16: widen (and add) back into grads_
    uint64_t trace_id = 0;      // its async event in the trace, if any
  };

  std::vector<size_t> counts_in(size_t begin, size_t end) const;  // per-rank slice of a range
  void launch_bucket(const Bucket& b);
  void complete(Pending& p);    // after its work is done: fold ZeRO-2/3 results into the shard
  void drain(bool wait_all);   // completes finished (or all) pending work, in order
  float* take_scratch(size_t n);
  void give_back_scratch(float* p);

  // Mixed precision (parallel.precision: bf16): params_ holds the fp32 master weights, which
  // the optimizer updates; the model computes with bf16_params_, a rounded copy of the same
  // shape refreshed after every change of the masters (init, restore, optimizer step).
  const char* compute_params() const;  // bf16_params_ or params_, as bytes
  size_t compute_param_bytes() const { return bf16_ ? sizeof(bf16) : sizeof(float); }
  void refresh_compute_params();

  const JobConfig& job_;
  const Model& model_;
  Compute& compute_;
  Communicator& comm_;
  Communicator& host_comm_;
  ShardMode mode_;
  bool bf16_;
  bool bf16_wire_;  // parallel.grad_reduce: bf16
  bool full_params_, full_grads_;  // whether this rank holds the whole buffer
  std::vector<size_t> shard_counts_;
  size_t shard_begin_, shard_end_;

  // Communicated buffers come from comm.allocate(): the MPI backend then reduces them in place
  // across ranks with one pass over the data instead of staging copies (several times faster).
  struct Buffer {
    float* ptr = nullptr;
    size_t len = 0;
    float* data() const { return ptr; }
    size_t size() const { return len; }
    float* begin() const { return ptr; }
    float* end() const { return ptr + len; }
  };
  Buffer allocate(size_t floats);
  Buffer params_;  // full, or this rank's shard (ZeRO-3); fp32 (the masters, with bf16)
  DeviceArray<bf16> bf16_params_;  // bf16 jobs: the compute copy of params_
  Buffer grads_;   // full, or this rank's shard (ZeRO-2/3)
  bf16* wire_ = nullptr;  // none/optimizer with bf16 reduction: bf16 gradients, full layout
  std::unique_ptr<AdamWOptimizer> optimizer_;
  StepScalars* scalars_ = nullptr;  // comm.allocate: the step's update guard

  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;
  bool communicate_ = false;
  std::deque<Pending> pending_;
  bool in_backward_ = false;
  OverlapStats overlap_;

  // Unit-sized scratch buffers (comm.allocate), allocated on first use and reused: the step loop
  // allocates nothing after the first step. Every rank makes the same requests in the same
  // order, as allocate() requires.
  struct Scratch {
    float* p;
    size_t n;
    int id;  // allocation order: the same on every rank, unlike addresses
  };
  std::vector<Scratch> scratch_free_, scratch_in_use_;
  int next_scratch_id_ = 0;
  // Pinned host copies of this rank's params, adam_m, adam_v slices, for checkpoints and
  // restores when the host cannot address the Compute's memory (allocated on first use).
  struct HostStaging {
    Compute* compute = nullptr;
    float* p = nullptr;
    ~HostStaging() {
      if (compute != nullptr) compute->release_host(p);
    }
  };
  HostStaging staging_;
  float* staging();  // 3 x the shard: params, adam_m, adam_v

  std::vector<float*> unit_params_;  // ZeRO-3: gathered unit, or null
  // ZeRO-3 prefetch: a unit's all-gather in flight into a scratch buffer.
  struct Gather {
    int unit = -1;
    float* buf = nullptr;
    std::unique_ptr<Work> work;
    uint64_t trace_id = 0;
  };
  Gather start_gather(int u);
  void drop_prefetch();  // waits for the prefetch in flight, if any, and frees its buffer
  static constexpr size_t kNoCursor = static_cast<size_t>(-1);
  std::vector<int> fetch_order_;  // units in the order one training micro-batch acquires them
  bool recording_ = false;        // this micro-batch records fetch_order_
  size_t cursor_ = kNoCursor;     // the position in fetch_order_ of the next acquire
  Gather prefetch_;
  std::vector<float*> unit_grads_;   // ZeRO-2/3: scratch of an acquired unit, or null
  size_t scratch_capacity_ = 0;
  StepProgress* progress_ = nullptr;
  TraceRecorder* trace_ = nullptr;
  void trace_unit(int u) {
    if (trace_ != nullptr) trace_->unit(u, model_.unit_name(u));
  }
};

}  // namespace rm
