// `ringmaster plan`: what a job would cost on a cluster (cluster_spec.h), per shard mode, from
// the job alone -- nothing is built or run.
//
// Per mode:
//  - memory per rank: planning/memory_estimate.h (the estimate `validate` and `run` refuse by);
//  - step time = compute + exposed communication. Compute: the step's training FLOPs per rank
//    (6 per parameter per token for the matrix products, plus causal attention's 12 x layers x
//    seq_len x width; the usual llm.c / PaLM accounting) over the device's rate x mfu.
//    Communication, ring model per collective: an all-reduce of B bytes costs 2(n-1)/n x B over
//    the per-rank bandwidth within a node, and 2(H-1)/H x B over each node's bandwidth between
//    H nodes (the hierarchical path: hier_path.h), plus 2(n-1) latencies; reduce-scatter and
//    all-gather half of that. Per step: none all-reduces the gradients; optimizer
//    reduce-scatters them and all-gathers the parameters; gradients does so per micro-batch;
//    full also all-gathers every unit's parameters in forward and backward of each micro-batch.
//    Buckets and units as the worker cuts them (whole units, from the last down). Overlap: on
//    gpu, communication hides behind the backward that issues it -- the last micro-batch's for
//    none and optimizer, every micro-batch's for gradients, both passes for full's gathers --
//    except the last bucket or unit (unit 0, a gpt's embeddings); on cpu nothing hides (the
//    cores move the bytes).
//  - checkpoint: a save writes parameters and Adam moments (12 bytes per parameter) at the
//    filesystem's rate; with checkpoint.async the step stalls only for the staging copy. The
//    interval that minimises expected lost work is Young/Daly's sqrt(2 x stall x MTBF), the
//    job's MTBF being the node's over the nodes.
// Recommended: the fastest mode that fits, the bucket size with the least exposed
// communication of 1, 4, 25 and 100 MiB, and that checkpoint interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "configs/cluster_spec.h"
#include "configs/job_config.h"
#include "planning/memory_estimate.h"

namespace rm {

struct ModePlan {
  ShardMode shard = ShardMode::kNone;
  bool recompute = false;      // model.recompute in this row
  bool recompute_changed = false;  // ... and it is not the job's own setting
  MemoryEstimate memory;       // per rank
  double host_need_gib = 0;    // RAM per node: ranks per node x the ranks' host memory
  double device_need_gib = 0;  // per GPU (gpu), else 0
  bool fits = false;
  double compute_s = 0, comm_s = 0, exposed_s = 0;
  double step_s() const { return compute_s + exposed_s; }
};

struct JobPlan {
  double params = 0;           // parameter count
  double flops_per_token = 0;  // training (forward + backward), as the job sets model.recompute
  double tokens_per_rank = 0;  // per optimizer step
  int ranks = 1, accumulation = 1;
  // The model's units' parameter floats as ModelFootprint::units has them: first, layer 1,
  // each later layer, last.
  double unit_floats[4] = {0, 0, 0, 0};
  // none, optimizer, gradients, full as the job is; for a gpt job without model.recompute
  // then the same four with it (less activation memory for a third more compute).
  std::vector<ModePlan> modes;
  int recommended = -1;         // index into modes; -1: nothing fits
  double bucket_mb = 25;        // recommended
  double save_s = 0, stall_s = 0;
  double job_mtbf_h = 0;
  double interval_s = 0;        // Young/Daly
  int64_t interval_steps = 0;   // of the recommended mode
  double lost_fraction = 0;     // expected share of time lost to failures and saves at that interval
};

// text_bytes: estimate_memory's (the text every rank encodes with data.tokenizer).
JobPlan plan_job(const JobConfig& job, const ClusterSpec& cluster, double text_bytes = 0);

// One collective's seconds on `cluster`'s topology (the ring model above).
double all_reduce_s(double bytes, const ClusterSpec& cluster);
double half_collective_s(double bytes, const ClusterSpec& cluster);  // reduce-scatter, all-gather

}  // namespace rm
