// Refusing a job that cannot fit in memory, before anything is written: `validate` and `run` for
// this host or a hostfile's, `submit` for a Slurm node (launcher/node_memory.h), and every
// worker for the host it got (worker/rank_main.cc), however it was started.
//
// The need is planning/memory_estimate.h's per-rank estimate times the ranks that share a host;
// the capacity is what host_memory.h reports (RAM; on the cuda backend also each GPU's, which
// holds one rank). A job that needs more is bad input: check_memory_fit throws one
// JobConfigError naming the job file, the estimate by category, the capacity, and the changes
// that would make it fit, each tried with the same estimator. The knobs:
//   - parallel.shard, stronger than the job's;
//   - train.micro_batch, smaller (a divisor of the per-rank batch, so the arithmetic holds);
//   - checkpoint.async: false (no staging copy of the rank's slice);
//   - model.recompute: true (gpt: activations of one block plus each block's input);
//   - model.classifier_chunk_tokens 4096, 1024 or 256 (gpt: the logits of that many tokens
//     at a time instead of a whole micro-batch's);
//   - more ranks, on more hosts like this one with as many ranks each (only sharding makes
//     that shrink what a host holds).
// Suggested: for each set of knobs, its gentlest fitting setting (fewest ranks, weakest mode,
// largest micro-batch); single knobs first, and a larger set only if it contains no smaller
// one that fits. When nothing fits, the message says what needs least.
// Pure: the capacities are arguments, so tests can ask about any machine.
#pragma once

#include <string>
#include <vector>

#include "configs/job_config.h"
#include "kernels/compute.h"
#include "planning/memory_estimate.h"

namespace rm {

struct MemoryCapacity {
  double host = 0;  // bytes of RAM of a host; 0 = unknown (not checked)
  double gpu = 0;   // bytes of one GPU (cuda backend); 0 = no GPU visible (not checked)
  // Where the host figure comes from, as the messages name it: "this host" for `run` and
  // `validate`; for `submit` (slurm = true) a Slurm node, e.g. "a node (cluster.memory_per_node:
  // 64G)", and more ranks are then more cluster.nodes, not a hostfile.
  std::string host_name = "this host";
  bool slurm = false;
};

struct MemoryFit {
  MemoryEstimate per_rank;
  ComputeKind backend = ComputeKind::kCpu;
  int ranks = 1, ranks_on_host = 1;
  // "memory: ~92.4 MiB per rank (...) x 1 rank on this host of 23.4 GiB": validate's line.
  std::string summary(const MemoryCapacity& capacity) const;
};

// ranks: the job's data-parallel ranks; ranks_on_host: how many of them the busiest host runs;
// text_bytes: estimate_memory's (the text every rank encodes with data.tokenizer).
// Throws JobConfigError (file: job.source_path) when the job does not fit; returns the estimate
// when it does.
MemoryFit check_memory_fit(const JobConfig& job, int ranks, int ranks_on_host, ComputeKind backend,
                           const MemoryCapacity& capacity, double text_bytes = 0);

// The changes that make the job fit, best first, as the message words them
// ("train.micro_batch: 2 (~3.1 GiB per host)"); empty when nothing tried fits.
std::vector<std::string> memory_fit_suggestions(const JobConfig& job, int ranks, int ranks_on_host,
                                                ComputeKind backend, const MemoryCapacity& capacity,
                                                double text_bytes = 0);

}  // namespace rm
