// The planner's arithmetic (planning/step_plan.h) against values computed by hand: the ring
// model of one collective, Young/Daly's checkpoint interval, and for three worked jobs every
// mode's compute and communication, the recommended shard mode and bucket size.
//
// The model of all three jobs: GPT, vocab V = 256, seq_len T = 256, width C = 256, L = 4 blocks.
//   parameters P = V*C (wte) + T*C (wpe) + L*(12*C^2 + 13*C) (per block: qkv 3C^2+3C, proj C^2+C,
//                  fc 4C^2+4C, fc proj 4C^2+C, two layer norms 4C) + 2*C (ln_f)
//                = 65,536 + 65,536 + 4*(786,432 + 3,328) + 512 = 3,290,624
//   units (what ZeRO-2/3 reduce one by one, and buckets are cut from, worker/sharded_state.cc):
//     first (wte, wpe) 131,072 floats, 4 blocks of 789,760 (3.01 MiB of fp32), last (ln_f) 512;
//     the first is reduced last: 131,072 / 3,290,624 = 0.0398320 of the gradients
//   buckets of whole units from the last down, each closed at bucket_mb: 25 and 100 MiB: 1;
//     4 MiB (1,048,576 floats): 3 (last + blocks 4, 3; blocks 2, 1; first); 1 MiB: 5 (last +
//     block 4; each block; first)
//   gradients (fp32) G = 4*P = 13,162,496 bytes; a checkpoint 12*P = 39,487,488 bytes
//   training FLOPs per token = 6*(12*L*C^2 + V*C) + 12*L*T*C
//                = 6*(3,145,728 + 65,536) + 3,145,728 = 22,413,312
//   with model.recompute, + (L-1)*(2*12*C^2 + 4*T*C) = 3*(1,572,864 + 262,144) = 5,505,024
//                = 27,918,336
// All three fit their clusters' memory with room to spare (asserted), so the choice is by step
// time alone: the first of the fastest, a later mode winning only by more than 2%.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "configs/cluster_spec.h"
#include "configs/job_config.h"
#include "planning/step_plan.h"

namespace rm {
namespace {

ClusterSpec cluster(int nodes, int per_node, const std::string& type) {
  ClusterSpec c;
  c.name = "test";
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.device_type = type;
  c.device_memory_gib = 80;
  c.node_memory_gib = 2048;
  c.node_mtbf_hours = 1000;
  return c;
}

JobConfig job(int global_batch, int micro_batch, bool async) {
  JobConfig j;
  j.model.type = ModelType::kGpt;
  j.model.vocab_size = 256;
  j.model.seq_len = 256;
  j.model.width = 256;
  j.model.heads = 4;
  j.model.layers = 4;
  j.train.global_batch = global_batch;
  j.train.micro_batch = micro_batch;
  j.parallel.bucket_mb = 25;
  j.parallel.overlap = true;
  j.checkpoint.async = async;
  return j;
}

// Cases B and C: 2 nodes x 4 GPUs of 100 TFLOP/s at mfu 0.5; 100 GB/s and 2 us within a node,
// 25 GB/s and 10 us between nodes; checkpoints written at 20 GB/s.
ClusterSpec two_nodes_of_four_gpus() {
  ClusterSpec c = cluster(2, 4, "gpu");
  c.tflops = 100;
  c.mfu = 0.5;
  c.intra_node = {100, 2};
  c.inter_node = {25, 10};
  c.fs_write_gbs = 20;
  return c;
}

// Relative tolerance: the values below are written to 8-10 significant digits.
void expect_close(double got, double want, const char* what) {
  EXPECT_NEAR(got, want, 1e-7 * std::fabs(want)) << what;
}

TEST(StepPlan, AllReduceWithinANodeIsTheRingsTwoNMinusOneOverN) {
  // 4 ranks on one node at 100 GB/s each: 2*(4-1)/4 * 1e9 B / 100e9 B/s = 1.5 * 0.01 = 0.015 s.
  ClusterSpec c = cluster(1, 4, "gpu");
  c.intra_node = {100, 3};
  c.inter_node = {1, 3};  // unused on one node
  expect_close(all_reduce_s(1e9, c), 0.015, "intra-node");
  // Reduce-scatter and all-gather move half an all-reduce's bytes: 0.0075 s.
  expect_close(half_collective_s(1e9, c), 0.0075, "reduce-scatter / all-gather");
}

TEST(StepPlan, AllReduceBetweenNodesIsTheRingOverNodes) {
  // 4 nodes of 1 rank at 25 GB/s per node: 2*(4-1)/4 * 1e9 / 25e9 = 1.5 * 0.04 = 0.06 s.
  ClusterSpec c = cluster(4, 1, "gpu");
  c.intra_node = {1, 3};  // unused: one rank per node
  c.inter_node = {25, 3};
  expect_close(all_reduce_s(1e9, c), 0.06, "inter-node");
  expect_close(half_collective_s(1e9, c), 0.03, "inter-node, half");
}

TEST(StepPlan, HierarchicalAllReduceAddsBothRings) {
  // 2 nodes x 8 ranks, 200 GB/s within, 50 GB/s between:
  //   within: 2*7/8 * 1e9 / 200e9 = 1.75 * 0.005 = 0.00875 s
  //   between: 2*1/2 * 1e9 / 50e9 = 1 * 0.02 = 0.02 s;  together 0.02875 s
  ClusterSpec c = cluster(2, 8, "gpu");
  c.intra_node = {200, 3};
  c.inter_node = {50, 3};
  expect_close(all_reduce_s(1e9, c), 0.02875, "hierarchical");
  expect_close(half_collective_s(1e9, c), 0.014375, "hierarchical, half");
  // One rank in all: nothing to exchange.
  EXPECT_EQ(all_reduce_s(1e9, cluster(1, 1, "gpu")), 0.0);
}

// Case A: 1 node x 2 CPU ranks (nothing overlaps on a CPU), 10 GB/s and 5 us between ranks,
// 1 TFLOP/s x mfu 0.5 = 5e11 FLOP/s. global_batch 8, micro_batch 4: 4 sequences = 1,024 tokens
// per rank, 1 micro-batch (A = 1). Synchronous saves at 1 GB/s, node MTBF 1000 h.
//   compute = 1,024 * 22,413,312 / 5e11 = 0.045902462976 s (recompute: 0.057176752128 s)
//   all-reduce(G) = 2*1/2 * 13,162,496 / 10e9 = 0.0013162496 s; half of it 0.0006581248 s
//   latency per all-reduce = 2*(2-1)*5 us = 1e-5 s, per reduce-scatter or all-gather half;
//   G in 25 MiB buckets: 1 bucket
//   none:      0.0013162496 + 1 bucket x 1e-5                         = 0.0013262496 s
//   optimizer: reduce-scatter G + all-gather P (fp32) + 2 x 0.5e-5     = 0.0013262496 s (a tie)
//   gradients: the same bytes, 6 units (first, 4 blocks, last) reduce-scattered and one
//              all-gather: 7 x 0.5e-5                                  = 0.0013512496 s
//   full:      3 halves (grads; params gathered in forward and backward), 3 x 6 x 0.5e-5
//              = 0.0019743744 + 0.00009                                = 0.0020643744 s
//   recommended: none (optimizer only ties), step 0.047228712576 s
//   buckets (none): 1 MiB: 5 buckets, +4e-5 s; 4 MiB: 3, +2e-5 s; 25 and 100 MiB: 1 -> 25 MiB
//   save = 39,487,488 B / 1e9 B/s = 0.039487488 s, stall the same (synchronous)
//   Young/Daly: sqrt(2 * 0.039487488 s * 3.6e6 s) = sqrt(284,309.9136) = 533.20719575 s
//             = 533.20719575 / 0.047228712576 = 11,289.89 -> 11,289 steps
TEST(StepPlan, CaseACpuRanksOnOneNode) {
  ClusterSpec c = cluster(1, 2, "cpu");
  c.tflops = 1;
  c.mfu = 0.5;
  c.intra_node = {10, 5};
  c.inter_node = {10, 5};
  c.fs_write_gbs = 1;
  const JobPlan p = plan_job(job(8, 4, /*async=*/false), c);
  EXPECT_EQ(p.params, 3290624);
  EXPECT_EQ(p.flops_per_token, 22413312);
  EXPECT_EQ(p.tokens_per_rank, 1024);
  EXPECT_EQ(p.accumulation, 1);
  ASSERT_EQ(p.modes.size(), 8u) << "four modes, then the four with model.recompute";
  const char* shards[] = {"none", "optimizer", "gradients", "full"};
  const double comm[] = {0.0013262496, 0.0013262496, 0.0013512496, 0.0020643744};
  for (int i = 0; i < 8; ++i) {
    const ModePlan& m = p.modes[i];
    EXPECT_STREQ(choice_name(m.shard), shards[i % 4]);
    EXPECT_EQ(m.recompute, i >= 4);
    EXPECT_TRUE(m.fits) << choice_name(m.shard);
    expect_close(m.compute_s, i < 4 ? 0.045902462976 : 0.057176752128, "compute");
    expect_close(m.comm_s, comm[i % 4], choice_name(m.shard));
    expect_close(m.exposed_s, comm[i % 4], "a CPU hides nothing");
  }
  EXPECT_EQ(p.recommended, 0);
  EXPECT_EQ(p.bucket_mb, 25);
  expect_close(p.save_s, 0.039487488, "save");
  expect_close(p.stall_s, 0.039487488, "stall");
  expect_close(p.job_mtbf_h, 1000, "job MTBF");
  expect_close(p.interval_s, 533.20719575, "Young/Daly");
  EXPECT_EQ(p.interval_steps, 11289);
}

// Case B: 2 nodes x 4 GPUs (8 ranks); 100 GB/s, 2 us within a node, 25 GB/s, 10 us between;
// 100 TFLOP/s x 0.5 = 5e13 FLOP/s. global_batch 64, micro_batch 8: 8 sequences = 2,048 tokens
// per rank, A = 1. Synchronous saves at 20 GB/s; node MTBF 1000 h over 2 nodes = 500 h.
//   compute = 2,048 * 22,413,312 / 5e13 = 0.00091804925952 s; backward (2/3) hides 0.00061203284 s
//   all-reduce(G) = 2*3/4 * G / 100e9 + 2*1/2 * G / 25e9 = 0.00019743744 + 0.00052649984
//                 = 0.00072393728 s; half H = 0.00036196864 s
//   latency per all-reduce = (2*3*2 + 2*1*10) us = 32 us; per reduce-scatter or all-gather 16 us
//   none: 1 bucket: the last bucket is all of it, exposed 0.00072393728 + 32e-6 = 0.00075593728
//   optimizer: H (hidden but for the last bucket: all) + H (gather, after) + 2 x 16e-6 = the same
//   gradients: H, unit by unit; the first unit's share, reduced last, shows:
//              H x 0.0398320 = 0.00001441792 (the rest hides behind backward), + H after the
//              update + (6 reduce-scatters + 1 all-gather) x 16e-6 = 0.00048838656 s
//   full: 3H = 0.00108590592 s; behind the whole compute 0.00016785666048 s remains, more than
//         the first unit's 3H x 0.0398320 = 0.00004325376 s; + 3 passes x 6 units x 16e-6
//         = 0.000288 -> 0.00045585666048 s
//   steps: none 0.0016739865, gradients 0.0014064358, full 0.00137390592 (18% faster than
//   none: recommended)
//   full does not bucket: every size gives the same step, and the first (1 MiB) is kept
//   save = 39,487,488 / 20e9 = 0.0019743744 s; Young/Daly sqrt(2 * 0.0019743744 * 1.8e6)
//        = sqrt(7,107.74784) = 84.30746017 s = 84.30746017 / 0.00137390592 = 61,363.34
//        -> 61,363
TEST(StepPlan, CaseBGpusOnTwoNodesRecommendZero3) {
  const ClusterSpec c = two_nodes_of_four_gpus();
  const JobPlan p = plan_job(job(64, 8, /*async=*/false), c);
  EXPECT_EQ(p.tokens_per_rank, 2048);
  ASSERT_EQ(p.modes.size(), 8u);
  const double exposed[] = {0.00075593728, 0.00075593728, 0.00048838656, 0.00045585666048};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(p.modes[i].fits) << choice_name(p.modes[i].shard);
    expect_close(p.modes[i].compute_s, 0.00091804925952, "compute");
    EXPECT_NEAR(p.modes[i].exposed_s, exposed[i], 1e-13) << choice_name(p.modes[i].shard);
  }
  ASSERT_EQ(p.recommended, 3);
  EXPECT_EQ(p.modes[3].shard, ShardMode::kFull);
  EXPECT_FALSE(p.modes[3].recompute);
  EXPECT_NEAR(p.modes[3].step_s(), 0.00137390592, 1e-13);
  EXPECT_EQ(p.bucket_mb, 1);
  expect_close(p.save_s, 0.0019743744, "save");
  expect_close(p.job_mtbf_h, 500, "job MTBF: node MTBF over 2 nodes");
  expect_close(p.interval_s, 84.30746017, "Young/Daly");
  EXPECT_EQ(p.interval_steps, 61363);
}

// Case C: case B's cluster, micro_batch 2 (A = 4 micro-batches a step) and async saves.
//   none and optimizer reduce in the last micro-batch's backward only, which hides 1/A of the
//   2/3: 0.00015300820992 s; with 25 MiB buckets (1) all shows: 0.00075593728 s exposed;
//   gradients reduce-scatters every micro-batch: 4H = 0.00144787456 s, 0.00083584172 s of it
//   beyond backward, + H + (4 x 6 + 1) x 16e-6 = 0.00159781036 s: now none is recommended (the
//   tie with optimizer goes to the first).
//   buckets (none), exposed = max(last bucket, all-reduce - last backward) + buckets x 32 us;
//   the last bucket holds the first unit, 0.0398320 of the all-reduce (0.00002883584 s), and
//   0.00072393728 - 0.00015300820992 = 0.00057092907008 s is beyond the last backward:
//     1 MiB:  5 buckets: 0.00057092907008 + 0.00016 = 0.00073092907008 s
//     4 MiB:  3 buckets: 0.00057092907008 + 0.000096 = 0.00066692907008 s (best)
//     25, 100 MiB: 1 bucket: 0.00072393728 + 0.000032 = 0.00075593728 s
//   async stall = 39,487,488 / 8 ranks / 5e9 B/s = 0.0009871872 s, under the 1 ms floor, so
//   Young/Daly takes 1 ms: sqrt(2 * 0.001 * 1.8e6) = sqrt(3,600) = 60 s
//   in steps: of the recommended row at the 4 MiB recommended with it (not at the job's own
//   25 MiB, which made checkpoint.every 5% fewer steps than its own 60 s):
//   60 / (0.00091804925952 + 0.00066692907008) = 37,855.8 -> 37,855
TEST(StepPlan, CaseCMicroBatchesRecommendReplicatedWithSmallBuckets) {
  const ClusterSpec c = two_nodes_of_four_gpus();
  const JobPlan p = plan_job(job(64, 2, /*async=*/true), c);
  EXPECT_EQ(p.accumulation, 4);
  EXPECT_NEAR(p.modes[2].exposed_s, 0.00159781036032, 1e-13);
  EXPECT_EQ(p.recommended, 0);
  EXPECT_EQ(p.bucket_mb, 4);
  JobConfig four = job(64, 2, /*async=*/true);
  four.parallel.bucket_mb = 4;
  EXPECT_NEAR(plan_job(four, c).modes[0].exposed_s, 0.00066692907008, 1e-13);
  four.parallel.bucket_mb = 1;
  EXPECT_NEAR(plan_job(four, c).modes[0].exposed_s, 0.00073092907008, 1e-13);
  expect_close(p.stall_s, 0.0009871872, "async stall");
  expect_close(p.save_s, 0.0019743744, "save");
  expect_close(p.interval_s, 60, "Young/Daly at the 1 ms floor");
  EXPECT_EQ(p.interval_steps, 37855);
}

// The buckets the latency terms count are the worker's (whole units, from the last down; the
// file comment's 5, 3 and 1): on a cluster of 1 s latencies and near-infinite bandwidth the
// replicated mode's communication is 2 s a bucket. Before: ceil(gradient bytes / bucket_mb),
// 13 buckets at 1 MiB. A model of 10^9 layers is counted in closed form, in no time or memory.
TEST(StepPlan, BucketsAreTheWorkersWholeUnits) {
  ClusterSpec c = cluster(1, 2, "cpu");
  c.tflops = 1;
  c.mfu = 0.5;
  c.intra_node = {1e9, 1e6};
  c.inter_node = {1e9, 1e6};
  c.fs_write_gbs = 1;
  for (const auto& [mb, buckets] : {std::pair<double, int>{1, 5}, {4, 3}, {25, 1}, {100, 1}}) {
    JobConfig j = job(8, 4, /*async=*/false);
    j.parallel.bucket_mb = mb;
    EXPECT_NEAR(plan_job(j, c).modes[0].comm_s, 2.0 * buckets, 1e-3) << mb << " MiB";
  }
  // 1,000 blocks of 789,760 floats at 4 MiB (1,048,576 floats): the last unit and blocks 1000 and
  // 999; then 2 blocks a bucket, 498 of them (998..3), block 2 left open; block 2 with block 1;
  // then unit 0: 501 buckets.
  JobConfig deep = job(8, 4, /*async=*/false);
  deep.model.layers = 1000;
  deep.parallel.bucket_mb = 4;
  EXPECT_NEAR(plan_job(deep, c).modes[0].comm_s, 2.0 * (1 + 498 + 1 + 1), 1e-2);
  deep.model.layers = 1000000000;
  EXPECT_TRUE(std::isfinite(plan_job(deep, c).modes[0].comm_s));
}

// Extreme cluster figures give bounded answers: a node that never fails checkpoints seldom
// (before: the interval overflowed to "checkpoint.every: 1"), one that fails at once loses at most
// all of the time (before: 7.3e294%).
TEST(StepPlan, ExtremeFailureRatesGiveBoundedAnswers) {
  ClusterSpec c = cluster(1, 1, "cpu");
  c.tflops = 1;
  c.mfu = 0.5;
  c.fs_write_gbs = 1;  // a save of finite time: with none (0) any plan loses all of it
  c.node_mtbf_hours = 1e300;
  const JobPlan never = plan_job(job(16, 8, /*async=*/true), c);
  EXPECT_GT(never.interval_steps, 1000000000);
  c.node_mtbf_hours = 1e307;  // x 3600 s: past DBL_MAX
  const JobPlan beyond = plan_job(job(16, 8, /*async=*/true), c);
  EXPECT_LT(beyond.lost_fraction, 1e-6);
  EXPECT_GT(beyond.interval_steps, 1000000000);
  c.node_mtbf_hours = 1e-300;
  const JobPlan always = plan_job(job(16, 8, /*async=*/true), c);
  EXPECT_LE(always.lost_fraction, 1.0);
  EXPECT_GE(always.interval_steps, 1);
}

// The MLP predicts every position of a sample, as GPT does: seq_len tokens a sample (before: one,
// and `plan` put its steps 20-60x faster than `run` measured them).
TEST(StepPlan, AnMlpStepComputesEveryPositionOfItsSamples) {
  JobConfig j = job(16, 8, /*async=*/true);
  j.model.type = ModelType::kMlp;
  ClusterSpec c = cluster(1, 2, "cpu");
  c.tflops = 1;
  c.mfu = 0.5;
  const JobPlan p = plan_job(j, c);
  EXPECT_EQ(p.tokens_per_rank, 8 * 256);
  ASSERT_FALSE(p.modes.empty());
  expect_close(p.modes[0].compute_s,
               p.tokens_per_rank * p.flops_per_token / (c.tflops * 1e12 * c.mfu), "compute");
}

}  // namespace
}  // namespace rm
