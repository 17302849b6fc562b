// What one rank of a job needs in memory, by category, worked out from the job alone: nothing is
// built and nothing large is allocated, so `validate` can answer for a job far larger than the
// machine it runs on.
//
// Each category follows the object that holds it (sizes from worker/sharded_state.h's table):
//   parameters     fp32 master weights: all of them, or this rank's shard under shard: full;
//                  with parallel.precision bf16 also the bf16 compute copy of the same shape
//   gradients      fp32: all of them (none, optimizer) or the shard (gradients, full)
//   optimizer      Adam m and v, fp32: all (none) or the shard (optimizer, gradients, full)
//   activations    the model's arena at train.micro_batch -- model_footprint(), i.e. the
//                  model's own layout and planning code -- the step's token ids, and the float
//                  scratch of the cpu backend's emulated bf16 kernels (kernels/cpu/bf16_layers.h)
//   buffers        communication scratch: ZeRO-2/3 units (gathered parameters, gradients being
//                  reduce-scattered: ShardedState::take_scratch's pool, replayed here) and the
//                  bf16 copy of the gradients that travels when parallel.grad_reduce is bf16
//   checkpoint     the asynchronous checkpoint's staging copy of this rank's slice of params,
//                  m and v (checkpoint.async), taken at start-up; with checkpoint.memory_every
//                  the two slots of that slice in /dev/shm, and on several hosts the replica
//                  of a peer's it keeps (worker/memory_checkpoints.h)
//   final_weights  after the last step, on rank 0 only: the host piece through which the model
//                  streams into weights.bin (ShardedState::stream_params()): none on the cpu
//   data           text files encoded at start-up with data.tokenizer, held as 2-byte token ids
//                  for the whole run (worker/data/encoded_text.h): at most 2 bytes per byte of
//                  the text, a token being at least one byte (GPT-2's tokenizer on English
//                  makes ~0.3 tokens a byte, so this bounds it ~3x high: such data belongs in
//                  token shards, `ringmaster tokenize`, which are mapped and cost nothing here)
//   runtime        what a rank holds besides: program, libraries, MPI, OpenMP and BLAS threads
//                  and their buffers, touched pages of the mapped data; measured
// Sharded sizes are the largest rank's (shards differ by at most one element).
//
// On the cuda backend the model's buffers are GPU memory: `device` says how much of the total
// that is (the checkpoint staging and the final weights stay on the host, and part of the GPU's
// share is an assumed CUDA context: not measured, no GPU here).
//
// Checked against the live objects (tests/memory_estimate_test.cc: the model's layout and
// arena, ShardedState::memory_plan() after real steps, exactly) and against the peak resident
// memory real runs report (tests/memory_fit_cli_test.cc; RM_MEMORY_FIT_ALL=1 for the full
// table): rss() was within -2% and +11% of it for GPT (128 and 768 wide, 4 and 12 blocks, fp32
// and bf16) and MLP jobs in every shard mode on 1, 2 and 4 ranks.
//
// Thread-safe (no state).
#pragma once

#include <string>

#include "configs/job_config.h"
#include "kernels/compute.h"

namespace rm {

struct MemoryEstimate {
  // Bytes per rank. Infinite for a shape too large to add up (ModelFootprint::unbounded()).
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0, checkpoint = 0,
         final_weights = 0, data = 0, runtime = 0;
  // Of the total, bytes in GPU memory (cuda backend); 0 on the cpu.
  double device = 0;
  // Not part of the total: peers' communication buffers this rank touches through the shared
  // windows of the mpi backend's shared-memory path (all ranks on one host). Their pages belong
  // to -- and are counted once, in the total of -- their owner, but every rank that touches them
  // has them in its resident set too: the reduce-scatter and all-reduce read this rank's shard of
  // every peer's buffer, the all-gather each peer's own shard, and ZeRO-2/3's unit scratch is
  // reused for units that lie in every peer's shard. So this is what peak RSS shows beyond
  // steps(); the host's need is total().
  double shared_views = 0;

  double total() const {
    return parameters + gradients + optimizer + activations + buffers + checkpoint + final_weights +
           data + runtime;
  }
  double host() const { return total() - device; }
  // What a host running `ranks_on_host` of the ranks needs: only the rank that writes
  // weights.bin holds the final weights.
  double host_for(int ranks_on_host) const {
    return (host() - final_weights) * ranks_on_host + final_weights;
  }
  // During the steps, before the final weights are gathered: what a step's peak RSS shows.
  double steps() const { return total() - final_weights; }
  // What getrusage's peak RSS of a rank shows during the steps.
  double rss() const { return steps() + shared_views; }
};

// One rank of `job` on `ranks` data-parallel ranks (>= 1), computing on `backend`, the ranks on
// `hosts` hosts (in-memory checkpoints keep a replica of a peer's where there are several).
// `text_bytes`: the size of the text files every rank encodes with data.tokenizer (the `data`
// category; worker/data/encoded_text.h: tokenized_text_bytes), which the job alone does not say.
MemoryEstimate estimate_memory(const JobConfig& job, int ranks, ComputeKind backend, int hosts = 1,
                               double text_bytes = 0);

// "1.23 GiB", "312 MiB": bytes in the largest binary unit (KiB to EiB) that keeps the number at
// or above 1, to three significant digits; "unbounded" for infinity.
std::string format_bytes(double bytes);

// "~1.23 GiB per rank (parameters 0.10, gradients 0.10, optimizer 0.20, activations 0.70,
// buffers 0, checkpoint 0.30, final weights 0.10, runtime 0.012)": the total, then each
// category in the total's unit.
std::string describe_estimate(const MemoryEstimate& m);

}  // namespace rm
