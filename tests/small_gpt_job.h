// The small GPT the in-process multi-rank tests share (dp_equivalence, grad_reduce,
// stream_order): 2 layers, width 32, 2 heads, 16 tokens, and gradient buckets small enough that
// even this model has several. Callers set what they vary (shard mode, overlap, data, steps).
#pragma once

#include <string>

#include "configs/job_config.h"

namespace rm::test {

inline JobConfig small_gpt_job(const std::string& shard, double bucket_mb = 0.01) {
  JobConfig job;
  job.model.type = ModelType::kGpt;
  job.model.seq_len = 16;
  job.model.layers = 2;
  job.model.heads = 2;
  job.model.width = 32;
  job.parallel.shard = choice_of<ShardMode>(shard);
  job.parallel.bucket_mb = bucket_mb;
  return job;
}

}  // namespace rm::test
