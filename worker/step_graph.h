// The device work of a training step's micro-batches recorded once as a graph and replayed on
// later steps (Compute::begin_capture / replay; on cuda a CUDA graph): one launch instead of
// ~200, so the host no longer feeds the GPU kernel by kernel -- what bounds a step of small
// kernels (GPT-2 124M at 4 sequences: ~10 ms a step, ~180 launches).
//
// On by default since a sitting measured it (2026-11-30, one H200, GPT-2 124M bf16: 10.4 -> 10.0
// ms a step at 4 sequences, 32.5 -> 32.3 at 16); RM_CUDA_GRAPH=0 turns it off. Only where a
// replay is exactly the step:
//  - a backend that records graphs (cuda), not profiled (TimedCompute's timing);
//  - one rank on the "self" communicator (no collective inside the step), parallel.shard none;
//  - no observability.trace (its per-unit events are host work a replay skips).
// What the recorded part is: the gradients' zeroing, every micro-batch's token upload, forward
// and backward, and the loss copied into the step's scalars. Per step the host fills the pinned
// token slots (inputs(j), targets(j): the uploads read them when the graph runs) and replays;
// the update (norm, AdamW: its learning rate and step count change every step) stays eager.
// The recording is made at the process's second step (the first sizes every scratch buffer and
// builds the GEMM plans) and again whenever the backend dropped it (has_graph(): scratch moved).
// A recording that fails (a call the backend cannot record) ran nothing: the trainer runs that
// step call by call and records no more, so the job goes on at eager speed, saying so once.
#pragma once

#include <cstddef>
#include <string>

#include "configs/job_config.h"
#include "kernels/compute.h"

namespace rm {

class StepGraph {
 public:
  // Whether the job's steps are recorded, by the rules above; `why` (may be null) says why not
  // when RM_CUDA_GRAPH=1 asked for it explicitly (empty otherwise: by default a job that cannot
  // use graphs, a cpu job among them, hears nothing). Throws check_switch()'s error.
  static bool wanted(const JobConfig& job, Compute& compute, const std::string& comm_backend,
                     std::string* why);

  // Throws InputError naming the variable when RM_CUDA_GRAPH holds a value other than unset,
  // empty, "0" or "1" ("off" must not mean on, the default). check_job calls it, so that such a
  // job is refused before anything is written.
  static void check_switch();

  // Pinned token slots for `micro_batches` micro-batches of `tokens` ids each.
  StepGraph(Compute& compute, int micro_batches, size_t tokens);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  int* inputs(int j) const { return slots_ + (2 * static_cast<size_t>(j)) * tokens_; }
  int* targets(int j) const { return slots_ + (2 * static_cast<size_t>(j) + 1) * tokens_; }
  // A graph is ready to replay.
  bool ready() { return compute_.has_graph(); }
  // A step may be recorded now (not while `bench train --profile` times every call).
  bool can_record() const { return compute_.can_capture(); }
  void replay() { compute_.replay(); }

  // Records the calls made during its life; commit() keeps the graph and runs it once (the
  // recorded calls ran nothing). Destroyed without commit (an exception), the recording is
  // discarded.
  class Recording {
   public:
    explicit Recording(StepGraph* graph);  // null: records nothing
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
    void commit();

   private:
    StepGraph* graph_;
  };

 private:
  Compute& compute_;
  size_t tokens_;
  int* slots_ = nullptr;  // allocate_host: micro_batches x (inputs, targets) x tokens
};

}  // namespace rm
