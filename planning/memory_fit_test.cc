// check_memory_fit and its suggestions (planning/memory_fit.h), on machines described by their
// capacity: every capacity here is derived from the estimator, so the tests hold for any model
// of memory the estimator has.
#include "planning/memory_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "configs/config_error.h"

namespace rm {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

JobConfig job_of(int width, int layers, int micro_batch, int global_batch) {
  JobConfig job;
  job.source_path = "job.yaml";
  job.model.type = ModelType::kGpt;
  job.model.seq_len = 128;
  job.model.width = width;
  job.model.heads = 8;
  job.model.layers = layers;
  job.train.micro_batch = micro_batch;
  job.train.global_batch = global_batch;
  return job;
}

double host_need(JobConfig job, int ranks, int on_host) {
  return estimate_memory(job, ranks, ComputeKind::kCpu).host_for(on_host);
}

// The message of the refusal, or "" if the job fits.
std::string refusal(const JobConfig& job, int ranks, int on_host, ComputeKind backend,
                    const MemoryCapacity& c) {
  try {
    check_memory_fit(job, ranks, on_host, backend, c);
    return "";
  } catch (const JobConfigError& e) {
    EXPECT_EQ(e.errors.size(), 1u);
    EXPECT_EQ(e.errors[0].file, "job.yaml");
    return e.errors[0].str();
  }
}

// "parallel.shard: full and train.micro_batch: 2 (~...)" -> the job with those keys set; false
// for a suggestion of more ranks (another machine).
bool apply(const std::string& suggestion, JobConfig& job) {
  if (suggestion.find(" ranks (") != std::string::npos) return false;
  const std::string keys = suggestion.substr(0, suggestion.find(" (~"));
  size_t at = 0;
  while (at < keys.size()) {
    size_t end = keys.find(" and ", at);
    if (end == std::string::npos) end = keys.size();
    const std::string kv = keys.substr(at, end - at);
    const std::string key = kv.substr(0, kv.find(": ")), value = kv.substr(kv.find(": ") + 2);
    if (key == "parallel.shard") {
      job.parallel.shard = choice_of<ShardMode>(value);
    } else if (key == "train.micro_batch") {
      job.train.micro_batch = std::stoi(value);
    } else if (key == "train.eval_batches") {
      job.train.eval_batches = std::stoi(value);
    } else if (key == "checkpoint.async") {
      job.checkpoint.async = value == "true";
    } else if (key == "model.recompute") {
      job.model.recompute = value == "true";
    } else if (key == "model.classifier_chunk_tokens") {
      job.model.classifier_chunk_tokens = std::stoi(value);
    } else {
      ADD_FAILURE() << "unknown key in suggestion: " << suggestion;
    }
    at = end + 5;
  }
  return true;
}

TEST(MemoryFit, AJobThatFitsPassesWithItsEstimate) {
  const JobConfig job = job_of(256, 4, 8, 16);
  MemoryCapacity c;
  c.host = host_need(job, 2, 2) * 1.01;
  const MemoryFit fit = check_memory_fit(job, 2, 2, ComputeKind::kCpu, c);
  EXPECT_EQ(fit.per_rank.total(), estimate_memory(job, 2, ComputeKind::kCpu).total());
  const std::string s = fit.summary(c);
  EXPECT_EQ(s.rfind("memory: ~", 0), 0u) << s;
  EXPECT_NE(s.find("x 2 ranks on this host"), std::string::npos) << s;
  EXPECT_EQ(refusal(job, 2, 2, ComputeKind::kCpu, MemoryCapacity{}), "") << "unknown: unchecked";
}

TEST(MemoryFit, TooLargeIsRefusedWithTheEstimateAndChangesThatEachFit) {
  // Activations dominate: a smaller micro-batch is one way, and must be the largest that fits.
  const JobConfig job = job_of(512, 8, 16, 32);
  MemoryCapacity c;
  JobConfig half = job;
  half.train.micro_batch = 8;
  c.host = (host_need(half, 2, 2) + host_need(job, 2, 2)) / 2;
  const std::string msg = refusal(job, 2, 2, ComputeKind::kCpu, c);
  ASSERT_NE(msg, "");
  for (const char* part : {"job.yaml: needs ~", " per rank (parameters ", ", activations ",
                           " x 2 ranks on this host = ", "; this host has ",
                           ". It would fit with: ", "train.micro_batch: 8 "}) {
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in\n" << msg;
  }
  const std::vector<std::string> ways = memory_fit_suggestions(job, 2, 2, ComputeKind::kCpu, c);
  ASSERT_FALSE(ways.empty());
  int applied = 0;
  for (const std::string& w : ways) {
    JobConfig changed = job;
    if (!apply(w, changed)) continue;
    ++applied;
    EXPECT_LE(host_need(changed, 2, 2), c.host) << w;
    EXPECT_EQ(changed.train.global_batch % (changed.train.micro_batch * 2), 0) << w;
  }
  EXPECT_GT(applied, 0);
}

TEST(MemoryFit, ASmallerMicroBatchKeepsTheValidationSet) {
  // The validation set is eval_batches x micro_batch windows: 8 x 16 here. A run in a directory
  // resumes with another micro_batch only if the product stays (base/run_dir.h).
  JobConfig job = job_of(512, 8, 16, 32);
  JobConfig half = job;
  half.train.micro_batch = 8;
  MemoryCapacity c;
  c.host = (host_need(half, 2, 2) + host_need(job, 2, 2)) / 2;
  ASSERT_EQ(job.train.eval_batches, 8);
  const std::string msg = refusal(job, 2, 2, ComputeKind::kCpu, c);
  EXPECT_NE(msg.find("train.micro_batch: 8 and train.eval_batches: 16 ("), std::string::npos)
      << msg;
  for (const std::string& w : memory_fit_suggestions(job, 2, 2, ComputeKind::kCpu, c)) {
    JobConfig changed = job;
    if (!apply(w, changed)) continue;
    EXPECT_EQ(changed.train.eval_batches * changed.train.micro_batch, 8 * 16) << w;
  }
  // A micro-batch that no whole eval_batches keeps the windows of is not suggested: 1 x 6 = 6
  // windows; the largest micro-batch under 6 that divides the per-rank batch of 12 and fits is 4,
  // which does not divide them: 3 is suggested, with eval_batches 2.
  JobConfig odd = job_of(512, 8, 6, 24);
  odd.train.eval_batches = 1;
  JobConfig four = odd;
  four.train.micro_batch = 4;
  c.host = (host_need(four, 2, 2) + host_need(odd, 2, 2)) / 2;
  const std::string odd_msg = refusal(odd, 2, 2, ComputeKind::kCpu, c);
  EXPECT_EQ(odd_msg.find("train.micro_batch: 4 "), std::string::npos) << odd_msg;
  EXPECT_NE(odd_msg.find("train.micro_batch: 3 and train.eval_batches: 2 ("), std::string::npos)
      << odd_msg;
  // No validation data, or none evaluated: nothing to keep, nothing said.
  job.data.val_fraction = 0;
  EXPECT_EQ(refusal(job, 2, 2, ComputeKind::kCpu, c).find("eval_batches"), std::string::npos);
  job.data.val_fraction = 0.1;
  job.train.eval_batches = 0;
  EXPECT_EQ(refusal(job, 2, 2, ComputeKind::kCpu, c).find("eval_batches"), std::string::npos);
}

TEST(MemoryFit, NoSuggestedEvalBatchesPassesItsBound) {
  // 10^6 x 16 windows: a micro-batch of 8 would need train.eval_batches 2 x 10^6, which the
  // schema refuses (configs/schema.cc): the suggestion would be a job that does not load.
  JobConfig job = job_of(512, 8, 16, 32);
  job.train.eval_batches = kMaxEvalBatches;
  JobConfig half = job;
  half.train.micro_batch = 8;
  MemoryCapacity c;
  c.host = (host_need(half, 2, 2) + host_need(job, 2, 2)) / 2;
  const std::vector<std::string> ways = memory_fit_suggestions(job, 2, 2, ComputeKind::kCpu, c);
  for (const std::string& w : ways) {
    JobConfig changed = job;
    if (!apply(w, changed)) continue;
    EXPECT_LE(changed.train.eval_batches, kMaxEvalBatches) << w;
    EXPECT_EQ(int64_t{changed.train.eval_batches} * changed.train.micro_batch,
              int64_t{kMaxEvalBatches} * 16)
        << w;
  }
}

TEST(MemoryFit, ShardingIsSuggestedWhenTheModelStateDominates) {
  // 16 bytes per parameter replicated on 4 ranks; sharded they share them.
  const JobConfig job = job_of(2048, 8, 1, 4);
  JobConfig sharded = job;
  sharded.parallel.shard = ShardMode::kOptimizer;
  MemoryCapacity c;
  c.host = (host_need(sharded, 4, 4) + host_need(job, 4, 4)) / 2;
  const std::vector<std::string> ways = memory_fit_suggestions(job, 4, 4, ComputeKind::kCpu, c);
  ASSERT_FALSE(ways.empty());
  EXPECT_EQ(ways[0].rfind("parallel.shard: optimizer (~", 0), 0u) << ways[0];
}

// A 2048-wide job, and a host with room for what 2 ranks hold sharded 8 ways (4 hosts of 2
// ranks) but for no 2 ranks of it on their own.
JobConfig wide_job() {
  return job_of(2048, 8, 1, 16);
}
MemoryCapacity room_for_2_of_8_sharded() {
  JobConfig spread = wide_job();
  spread.parallel.shard = ShardMode::kFull;
  MemoryCapacity c;
  c.host = host_need(spread, 8, 2) * 1.01;
  EXPECT_GT(host_need(spread, 2, 2), c.host);
  return c;
}

TEST(MemoryFit, MoreHostsAreSuggestedWhenNoHostOfRanksFits) {
  const std::string msg = refusal(wide_job(), 2, 2, ComputeKind::kCpu, room_for_2_of_8_sharded());
  EXPECT_NE(msg.find(" ranks (4 hosts like this one, 2 ranks each: --hosts)"), std::string::npos)
      << msg;
}

TEST(MemoryFit, OnSlurmNodesAreNamedAndMoreNodesAreSuggested) {
  // The same job and capacity as above, as `submit` asks: 2 nodes x 2 tasks.
  MemoryCapacity c = room_for_2_of_8_sharded();
  c.slurm = true;
  c.host_name = "a node (cluster.memory_per_node: 3G)";
  const std::string msg = refusal(wide_job(), 4, 2, ComputeKind::kCpu, c);
  EXPECT_NE(msg.find(" x 2 ranks per node = "), std::string::npos) << msg;
  EXPECT_NE(msg.find("; a node (cluster.memory_per_node: 3G) has "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" on 8 ranks (cluster.nodes: 4)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("--hosts"), std::string::npos) << msg;
}

TEST(MemoryFit, RecomputeIsSuggestedWhenActivationsDominate) {
  // Long sequences, a large micro-batch: the attention scores of every block dominate.
  JobConfig job = job_of(256, 8, 16, 32);
  job.model.seq_len = 512;
  JobConfig again = job;
  again.model.recompute = true;
  MemoryCapacity c;
  c.host = host_need(again, 1, 1) * 1.01;
  ASSERT_GT(host_need(job, 1, 1), c.host);
  const std::vector<std::string> ways = memory_fit_suggestions(job, 1, 1, ComputeKind::kCpu, c);
  ASSERT_FALSE(ways.empty());
  EXPECT_NE(std::find_if(ways.begin(), ways.end(),
                         [](const std::string& w) {
                           return w.rfind("model.recompute: true (~", 0) == 0;
                         }),
            ways.end())
      << ways[0];
  // An mlp has nothing to recompute: never suggested.
  JobConfig mlp = job;
  mlp.model.type = ModelType::kMlp;
  MemoryCapacity small;
  small.host = host_need(mlp, 1, 1) / 2;
  for (const std::string& w : memory_fit_suggestions(mlp, 1, 1, ComputeKind::kCpu, small)) {
    EXPECT_EQ(w.find("model.recompute"), std::string::npos) << w;
  }
}

TEST(MemoryFit, ClassifierChunksAreSuggestedWhenTheLogitsDominate) {
  // GPT-2's vocabulary and a small model: the [tokens, 50257] logits dominate.
  JobConfig job = job_of(64, 2, 16, 16);
  job.model.vocab_size = 50257;
  job.model.seq_len = 512;
  MemoryCapacity c;
  JobConfig chunked = job;
  chunked.model.classifier_chunk_tokens = 4096;
  c.host = host_need(chunked, 1, 1) * 1.01;
  ASSERT_GT(host_need(job, 1, 1), c.host);
  const std::vector<std::string> ways = memory_fit_suggestions(job, 1, 1, ComputeKind::kCpu, c);
  ASSERT_FALSE(ways.empty());
  // The largest chunk that fits, alone; and each suggestion, applied, fits.
  EXPECT_NE(std::find_if(ways.begin(), ways.end(),
                         [](const std::string& w) {
                           return w.rfind("model.classifier_chunk_tokens: 4096 (~", 0) == 0;
                         }),
            ways.end())
      << ways[0];
  for (const std::string& w : ways) {
    JobConfig j = job;
    if (apply(w, j)) {
      EXPECT_LE(host_need(j, 1, 1), c.host) << w;
    }
  }
  // A micro-batch of 256 tokens: no chunk tried is smaller, so none is suggested.
  JobConfig short_batches = job;
  short_batches.train.micro_batch = 1;
  short_batches.model.seq_len = 256;
  MemoryCapacity tiny;
  tiny.host = host_need(short_batches, 1, 1) * 0.999;
  for (const std::string& w :
       memory_fit_suggestions(short_batches, 1, 1, ComputeKind::kCpu, tiny)) {
    EXPECT_EQ(w.find("model.classifier_chunk_tokens"), std::string::npos) << w;
  }
}

TEST(MemoryFit, NothingFitsSaysWhatNeedsLeast) {
  const JobConfig job = job_of(1024, 4, 8, 16);
  MemoryCapacity c;
  c.host = 1024 * 1024;  // 1 MiB: below any runtime
  const std::string msg = refusal(job, 1, 1, ComputeKind::kCpu, c);
  EXPECT_NE(msg.find(". Nothing tried fits ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("; the least any needs is with "), std::string::npos) << msg;
  EXPECT_TRUE(memory_fit_suggestions(job, 1, 1, ComputeKind::kCpu, c).empty());
}

// 2^22 ranks (4096 nodes of 1024): ranks x 1024 passed INT_MAX, the search for variants ended
// before the job itself, and the refusal read an empty list (a segfault in submit --dry-run).
TEST(MemoryFit, MillionsOfRanksThatDoNotFitAreRefusedInWords) {
  const int ranks = 1 << 22;
  const JobConfig job = job_of(256, 2, 1, ranks);
  MemoryCapacity c;
  c.host = 1024 * 1024;
  const std::string msg = refusal(job, ranks, 1024, ComputeKind::kCpu, c);
  EXPECT_NE(msg.find(". Nothing tried fits ("), std::string::npos) << msg;
}

TEST(MemoryFit, ARanksPerHostFromAHostfileIsSaidSo) {
  const JobConfig job = job_of(512, 8, 16, 32);
  MemoryCapacity c;
  c.host = host_need(job, 4, 2) / 2;
  const std::string msg = refusal(job, 4, 2, ComputeKind::kCpu, c);
  EXPECT_NE(msg.find(" x 2 ranks per host = "), std::string::npos) << msg;
}

TEST(MemoryFit, OnAGpuTheGpuIsChecked) {
  const JobConfig job = job_of(1024, 8, 8, 16);
  const MemoryEstimate e = estimate_memory(job, 1, ComputeKind::kCuda);
  EXPECT_GT(e.device, 0);
  EXPECT_LT(e.device, e.total()) << "checkpoint staging and final weights stay on the host";
  MemoryCapacity c;
  c.host = 1024 * kGiB;
  c.gpu = e.device * 0.9;
  const std::string msg = refusal(job, 1, 1, ComputeKind::kCuda, c);
  EXPECT_NE(msg.find(" on its GPU; a GPU here has "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("this host has"), std::string::npos) << "the host has room\n" << msg;
  c.gpu = 0;  // no GPU visible: not checked
  EXPECT_EQ(refusal(job, 1, 1, ComputeKind::kCuda, c), "");
  const std::string s = check_memory_fit(job, 1, 1, ComputeKind::kCuda, c).summary(c);
  EXPECT_NE(s.find("no GPU visible here: not checked"), std::string::npos) << s;
}

// The GPU figure against the one measurement there is: GPT-2 124M's shape, bf16, 16 sequences
// a step, `bench train` on one H200 (2026-11-30, docs/gpu.md): 9.52 GiB in use, CUDA's context
// and cuDNN's attention workspace (384 MiB) among them.
TEST(MemoryFit, TheGpuFigureAtGpt2sShapeIsTheOneMeasured) {
  JobConfig job = job_of(768, 12, 16, 16);
  job.model.vocab_size = 50257;
  job.model.seq_len = 1024;
  job.model.heads = 12;
  job.parallel.precision = Precision::kBf16;
  const double device = estimate_memory(job, 1, ComputeKind::kCuda).device;
  EXPECT_GT(device, 0.97 * 9.52 * kGiB) << device / kGiB << " GiB";
  EXPECT_LT(device, 1.05 * 9.52 * kGiB) << device / kGiB << " GiB";
}

}  // namespace
}  // namespace rm
